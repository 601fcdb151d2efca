"""Bring up the device a profile describes, through its kind's module (imported lazily)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol, cast

from harness.devices.acquired_place import LabResources
from harness.devices.base import Device, OpenContext
from harness.devices.host_tools import HostTool, check_host_tools
from harness.profiles import kinds
from harness.profiles.device_profile import DeviceProfile, ProfileError
from harness.profiles.kinds import device_kind


class KindModule(Protocol):
    """What a device kind's module provides."""

    def check_settings(self, profile: DeviceProfile) -> None:
        """Validate the profile's transport fields without reaching the device."""

    def host_tools(self, profile: DeviceProfile) -> tuple[HostTool, ...]:
        """Every program the profile's device needs on this machine (to build its agent,
        start its emulator, reach it), each once."""
        ...

    def open_device(self, profile: DeviceProfile, context: OpenContext) -> Device:
        """Start the emulator (if the profile asks for one) and the device; whatever is
        started goes on ``context.resources``, which the device closes."""
        ...

    def lab_settings(
        self, profile: DeviceProfile, resources: LabResources, place: str
    ) -> dict[str, object]:
        """Only kinds whose ``KIND`` has ``lab``: the transport fields of the device
        in acquired labgrid place ``place``, from its resources or tags, each checked
        with the profile's own rule (:class:`LabResourceError` names place and field)."""
        ...


def kind_module(profile: DeviceProfile) -> KindModule:
    """The module of the profile's device kind (``transport.kind``, checked by the profile)."""
    return cast(KindModule, kinds.kind_module(profile.kind))


def needed_host_tools(profile: DeviceProfile) -> tuple[HostTool, ...]:
    """Every program ``profile``'s device needs on this machine, each once (its kind's)."""
    return tuple(dict.fromkeys(kind_module(profile).host_tools(profile)))


def check_transport_settings(profile: DeviceProfile) -> None:
    """Validate the profile's transport fields without reaching the device.

    :class:`ProfileError` names the file and the field; devices are opened later,
    so this lets a listing or a run refuse a broken profile before anything starts.
    (A lab profile is checked through :func:`harness.farm.selection.check_profile`.)
    """
    if profile.emulator is not None:
        return  # the emulator supplies them; open_device refuses fields it would set
    kind_module(profile).check_settings(profile)


def open_device(profile: DeviceProfile, *, board_reset: Callable[[], None] | None = None) -> Device:
    """Bring up the device ``profile`` describes (starting its emulator, if any).

    ``board_reset`` resets a serial board from outside (its lab place's power port).
    A program the device needs on this machine that is missing is one line
    (:class:`~harness.devices.host_tools.MissingHostTool`), before anything starts.
    """
    kind = device_kind(profile.kind)
    check_host_tools(profile, needed_host_tools(profile))
    if profile.emulator is not None:
        clash = sorted(set(profile.settings) & set(kind.emulator_fields))
        if clash:
            raise ProfileError(
                f"{profile.where('transport.' + clash[0])}: set by the {profile.emulator} "
                f"emulator the harness starts ({', '.join(kind.emulator_fields)}); remove it "
                "from the profile"
            )
    resources = contextlib.ExitStack()
    try:
        return kind_module(profile).open_device(profile, OpenContext(resources, board_reset))
    except BaseException:
        resources.close()
        raise
