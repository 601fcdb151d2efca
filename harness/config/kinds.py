"""The registry of device kinds: every ``transport.kind`` a profile may name.

A kind is one module, which declares its whole spec in one :class:`DeviceKind`, named
``KIND``, next to its functions (``check_settings``, ``open_device`` and, for a
lab-capable kind, ``lab_settings``; see :class:`harness.devices.bring_up.KindModule`):

- the kinds shipped with the harness are the modules of :mod:`harness.devices` that
  define ``KIND`` (``harness/devices/<kind>.py``, named as the kind);
- a kind from another package registers its module under the entry point group
  ``et_harness.device_kinds`` (as pytest plugins do under ``pytest11``), the entry
  point's name being the kind's.

A kind's module is imported only when a profile of that kind is read, checked or opened
(so reading a serial profile loads no paramiko); listing every kind imports them all.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.config.settings import ProfileError

Settings = Mapping[str, Any]
ENTRY_POINT_GROUP = "et_harness.device_kinds"
BUILT_IN_PACKAGE = "harness.devices"
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
    # Whether the harness builds the device's agent against an ExecuTorch SDK (a hosted
    # device), so that --runtime chooses what it runs; False: the board's firmware is its
    # agent.
    builds_agent: bool = True


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _built_in_module(name: str) -> str | None:
    module = f"{BUILT_IN_PACKAGE}.{name}"
    return module if importlib.util.find_spec(module) is not None else None


def kind_module_name(name: str) -> str:
    """The module of kind ``name``; :class:`UnknownKind` if there is none."""
    if isinstance(name, str) and _KIND_NAME.fullmatch(name):
        module = _built_in_module(name)
        if module is not None and getattr(importlib.import_module(module), "KIND", None):
            return module
        entry = _entry_points().get(name)
        if entry is not None:
            return entry.value.partition(":")[0].strip()
    raise UnknownKind(f"is not one of {', '.join(kind_names())}")


def device_kind(name: object) -> DeviceKind:
    """The spec of kind ``name`` (its module's ``KIND``); :class:`UnknownKind` if none."""
    if not isinstance(name, str):
        raise UnknownKind(f"is not one of {', '.join(kind_names())}")
    return _device_kind(name)


@functools.cache
def _device_kind(name: str) -> DeviceKind:
    module = importlib.import_module(kind_module_name(name))
    kind = getattr(module, "KIND", None)
    if not isinstance(kind, DeviceKind) or kind.name != name:
        raise UnknownKind(
            f"names module {module.__name__}, whose KIND is no DeviceKind named {name!r}; "
            "fix the module or its entry point"
        )
    return kind


@functools.cache
def kind_names() -> tuple[str, ...]:
    """Every kind's name: the built-in modules that declare a KIND, and the entry points."""
    package = importlib.import_module(BUILT_IN_PACKAGE)
    modules = (f"{BUILT_IN_PACKAGE}.{info.name}" for info in pkgutil.iter_modules(package.__path__))
    built_in = [
        kind.name
        for kind in (getattr(importlib.import_module(m), "KIND", None) for m in modules)
        if isinstance(kind, DeviceKind)
    ]
    return tuple(sorted({*built_in, *_entry_points()}))


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
