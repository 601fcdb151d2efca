"""Device kind ``adb``: an Android device through the real adb client; emulator ``adbd``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from harness.devices.hosted import HostedDevice, emulator_home, with_settings
from harness.profile import DeviceProfile
from harness.transport.adb import AdbTarget, AdbTransport


def check_settings(profile: DeviceProfile) -> None:
    AdbTarget.from_profile(profile)


def open_device(profile: DeviceProfile, resources: contextlib.ExitStack,
                board_reset: Callable[[], None] | None) -> HostedDevice:
    emulator = None
    if profile.emulator is not None:
        from harness.emulators.adb_emulator import AdbEmulator
        from harness.emulators.adb_server import PrivateAdbServer

        home = emulator_home(profile, resources)
        server = resources.enter_context(PrivateAdbServer(home / "adb-server"))
        emulator = AdbEmulator(home / "device-root")
        endpoint = resources.enter_context(emulator)
        profile = with_settings(profile, connect=endpoint.serial, server_port=server.port)
    return HostedDevice(profile, AdbTransport.from_profile(profile), resources, emulator)
