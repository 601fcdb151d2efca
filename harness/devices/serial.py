"""Device kind ``serial``: an MCU whose firmware is the agent; emulator ``qemu-mcu``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from harness.devices.firmware import FirmwareDevice
from harness.mcu_boards import DEFAULT_MACHINE
from harness.profile import DeviceProfile, ProfileError
from harness.transport.serial import SerialConfigError, SerialPortConfig


def check_settings(profile: DeviceProfile) -> None:
    port_settings(profile)


def port_settings(profile: DeviceProfile) -> SerialPortConfig:
    try:
        return SerialPortConfig.from_settings(profile.settings, profile.where("transport"))
    except SerialConfigError as exc:
        raise ProfileError(str(exc)) from None


def open_device(profile: DeviceProfile, resources: contextlib.ExitStack,
                board_reset: Callable[[], None] | None) -> FirmwareDevice:
    if profile.emulator is None:
        return FirmwareDevice(profile, port=port_settings(profile), reset=board_reset,
                              resources=resources)
    if profile.settings:
        raise ProfileError(
            f"{profile.where('transport.' + sorted(profile.settings)[0])}: the qemu-mcu "
            "emulator sets the port itself; an emulated board takes no transport fields"
        )
    from harness.emulators.qemu_mcu import QemuMcu, build_firmware

    machine = profile.machine or DEFAULT_MACHINE
    qemu = resources.enter_context(QemuMcu(build_firmware(machine), machine=machine))
    return FirmwareDevice(profile, qemu=qemu, reset=board_reset, resources=resources)
