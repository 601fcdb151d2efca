"""The registry of device kinds: one entry per ``transport.kind`` a profile may name.

Adding a kind is one module in :mod:`harness.devices` (a ``check_settings`` and an
``open_device`` function, see :class:`harness.devices.bring_up.KindModule`) plus one
entry here. The registry is pure data and names each kind's module as a string, so
profile validation and the pytest plugin read it without loading any transport or
emulator, and the profile layer stays below the devices it describes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Settings = Mapping[str, Any]


@dataclass(frozen=True)
class DeviceKind:
    """One kind of device."""

    name: str  # the profile's transport.kind
    module: str  # imported when a device of this kind is checked or opened
    emulator: str | None = None  # the emulator a profile of this kind may ask for
    # Transport fields the emulator fills in itself; a profile that sets one is refused.
    emulator_fields: tuple[str, ...] = ()
    on_this_machine: bool = False  # the device is this machine (agent fields run things here)
    # What identifies the hardware behind a profile's transport fields, so that two
    # profiles naming one board share one lock (harness.farm.lock); None: the profile name.
    hardware_key: Callable[[Settings], str] | None = None


def _ssh_key(settings: Settings) -> str:
    return f"ssh:{settings.get('user', '')}@{settings.get('host')}:{settings.get('port', 22)}"


def _adb_key(settings: Settings) -> str:
    server = f"{settings.get('server_host', 'localhost')}:{settings.get('server_port', '')}"
    target = settings.get("serial") or settings.get("connect") or "the only device"
    return f"adb:{server}/{target}"


def _serial_key(settings: Settings) -> str:
    return f"serial:{settings.get('port') or settings.get('url')}"


KINDS: dict[str, DeviceKind] = {
    kind.name: kind
    for kind in (
        DeviceKind("local", "harness.devices.local", on_this_machine=True),
        DeviceKind(
            "ssh", "harness.devices.ssh", "sshd", ("host", "ssh_config"), hardware_key=_ssh_key
        ),
        DeviceKind(
            "adb", "harness.devices.adb", "adbd", ("connect", "server_port"), hardware_key=_adb_key
        ),
        DeviceKind("serial", "harness.devices.serial", "qemu-mcu", hardware_key=_serial_key),
    )
}

EMULATORS: dict[str, DeviceKind] = {k.emulator: k for k in KINDS.values() if k.emulator}
