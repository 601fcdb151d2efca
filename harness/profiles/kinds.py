"""The registry of device kinds: every ``transport.kind`` a profile may name.

A kind is one module, which declares its whole spec in one :class:`DeviceKind`, named
``KIND``, next to its functions (``check_settings``, ``host_tools``, ``open_device`` and,
for a lab-capable kind, ``lab_settings``; see :class:`harness.devices.bring_up.KindModule`).

Every kind, the harness's own too, is found through the entry point group
``et_harness.device_kinds`` (as pytest finds plugins under ``pytest11`` and labgrid its
drivers), the entry point's name being the kind's and its value the kind's module: the
harness's own are in its ``pyproject.toml``, a kind from another package in that package's.
The registry names no module itself: the kinds depend on it, never it on them.

A kind's module is imported only when a profile of that kind is read, checked or opened
(so reading a serial profile loads no paramiko); listing every kind imports them all.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from harness.profiles.validator import ProfileError

Settings = Mapping[str, Any]
ENTRY_POINT_GROUP = "et_harness.device_kinds"
DISTRIBUTION = "executorch-hil-harness"  # the harness's own kinds win a name clash
_KIND_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# Emulator names before one name per emulator (#27): still read, with a deprecation note.
RENAMED_EMULATORS = {"sshd": "ssh-emu", "adbd": "adb-emu", "qemu-mcu": "mcu-emu"}


class UnknownKind(ProfileError):
    """No kind module has this name; the message lists the kinds there are (the profile
    layer puts the file and field before it)."""


@dataclass(frozen=True, kw_only=True)
class LabAddress:
    """Where a kind's device is in an acquired labgrid place (:mod:`harness.lab.resources`).

    The kind's module has ``lab_settings(profile, resources, place)``, which returns
    ``fields`` (and may add defaults the profile did not set) from the place's
    resources and tags, each value checked with the profile's own rule.
    """

    fields: tuple[str, ...]  # transport fields that come from the lab, never from a lab profile
    # What the transport's checks of the other fields see before a place is acquired.
    placeholder: tuple[tuple[str, object], ...]


@dataclass(frozen=True, kw_only=True)
class DeviceKind:
    """One kind of device: what the rest of the harness needs to know of it."""

    name: str  # the profile's transport.kind
    settings: type | None  # its <Kind>Settings class (the transport fields); None: takes none
    emulator: str | None = None  # the emulator a profile of this kind may ask for
    # Other emulators of this kind's devices (ssh: linux-emu, a board that boots).
    more_emulators: tuple[str, ...] = ()
    # Transport fields the emulator fills in itself; a profile that sets one is refused.
    emulator_fields: tuple[str, ...] = ()
    on_this_machine: bool = False  # the device is this machine (agent fields run things here)
    # What identifies the hardware behind a profile's transport fields, so that two
    # profiles naming one board share one lock (harness.farm.lock); None: the profile name.
    lock_key: Callable[[Settings], str] | None = None
    # How a lab profile's device is found in its acquired place; None: the place is only
    # held (a device attached to this machine), its settings are the profile's.
    lab: LabAddress | None = None
    # Whether open_device uses a reset from outside (a lab place's power port, before each
    # agent session); a lab profile of another kind may not ask for one.
    takes_outside_reset: bool = False
    # Whether the device, power-cycled from outside (a lab place's power port), can be
    # waited for while it boots (Device.power_cycled): a lab profile may ask to recover it so.
    awaits_boot: bool = False
    # Whether the harness builds the device's agent against an ExecuTorch SDK (a hosted
    # device), so that --runtime chooses what it runs; False: the board's firmware is its
    # agent.
    builds_agent: bool = True


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Kind name -> its entry point; the harness's own kinds win a name clash."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if _KIND_NAME.fullmatch(entry.name) and (entry.name not in found or _own(entry)):
            found[entry.name] = entry
    return found


def _own(entry: importlib.metadata.EntryPoint) -> bool:
    dist = entry.dist
    return dist is not None and dist.name == DISTRIBUTION


def kind_module(name: str) -> ModuleType:
    """The module of kind ``name``, loaded through its entry point; :class:`UnknownKind`
    if no entry point has that name."""
    entry = _entry_points().get(name) if isinstance(name, str) else None
    if entry is None:
        raise UnknownKind(f"is not one of {', '.join(kind_names())}")
    loaded = entry.load()
    if not isinstance(loaded, ModuleType):
        raise UnknownKind(
            f"has entry point {entry.value!r}, which names no module; an entry point of "
            f"{ENTRY_POINT_GROUP} names the kind's module"
        )
    return loaded


def device_kind(name: object) -> DeviceKind:
    """The spec of kind ``name`` (its module's ``KIND``); :class:`UnknownKind` if none."""
    if not isinstance(name, str):
        raise UnknownKind(f"is not one of {', '.join(kind_names())}")
    return _device_kind(name)


@functools.cache
def _device_kind(name: str) -> DeviceKind:
    module = kind_module(name)
    kind = getattr(module, "KIND", None)
    if not isinstance(kind, DeviceKind) or kind.name != name:
        raise UnknownKind(
            f"names module {module.__name__}, whose KIND is no DeviceKind named {name!r}; "
            "fix the module or its entry point"
        )
    return kind


@functools.cache
def kind_names() -> tuple[str, ...]:
    """Every kind's name: the entry points of :data:`ENTRY_POINT_GROUP` (imports none)."""
    return tuple(sorted(_entry_points()))


def all_kinds() -> tuple[DeviceKind, ...]:
    """Every kind's spec (imports every kind's module)."""
    return tuple(device_kind(name) for name in kind_names())


def emulators() -> dict[str, DeviceKind]:
    """Emulator name -> the kind it emulates (imports every kind's module)."""
    return {
        name: kind
        for kind in all_kinds()
        for name in (kind.emulator, *kind.more_emulators)
        if name is not None
    }
