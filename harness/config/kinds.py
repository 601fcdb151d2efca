"""The registry of device kinds: one entry per ``transport.kind`` a profile may name.

Adding a kind is one module in :mod:`harness.devices` (a ``check_settings`` and an
``open_device`` function, see :class:`harness.devices.bring_up.KindModule`, and a
``lab_settings`` function if the kind's devices can come from a labgrid lab) plus one
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
class LabAddress:
    """Where a kind's device is in an acquired labgrid place (:mod:`harness.farm.lab_resources`).

    The kind's module has ``lab_settings(profile, resources, place)``, which returns
    ``fields`` (and may add defaults the profile did not set) from the place's
    resources and tags, each value checked with the profile's own rule.
    """

    fields: tuple[str, ...]  # transport fields that come from the lab, never from a lab profile
    # What the transport's checks of the other fields see before a place is acquired.
    placeholder: tuple[tuple[str, object], ...]


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
    # How a lab profile's device is found in its acquired place; None: the place is only
    # held (a device attached to this machine), its settings are the profile's.
    lab: LabAddress | None = None
    # Whether open_device uses a reset from outside (a lab place's power port, before each
    # agent session); a lab profile of another kind may not ask for one.
    takes_outside_reset: bool = False


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
            "ssh",
            "harness.devices.ssh",
            "sshd",
            ("host", "ssh_config"),
            hardware_key=_ssh_key,
            lab=LabAddress(
                ("host", "port", "user"), (("host", "127.0.0.1"), ("port", 22), ("user", "lab"))
            ),
        ),
        DeviceKind(
            "adb",
            "harness.devices.adb",
            "adbd",
            ("connect", "server_port"),
            hardware_key=_adb_key,
            lab=LabAddress(
                ("serial", "server_host", "server_port", "connect"),
                (("serial", "lab"), ("server_host", "127.0.0.1"), ("server_port", 5037)),
            ),
        ),
        DeviceKind(
            "serial",
            "harness.devices.serial",
            "mcu-emu",
            hardware_key=_serial_key,
            lab=LabAddress(("url", "port"), (("url", "rfc2217://127.0.0.1:1"),)),
            takes_outside_reset=True,
        ),
    )
}

EMULATORS: dict[str, DeviceKind] = {k.emulator: k for k in KINDS.values() if k.emulator}
