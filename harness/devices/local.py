"""Device kind ``local``: this machine, its agent run as a child process."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from harness.config.profile import DeviceProfile, ProfileError
from harness.devices.hosted import HostedDevice
from harness.transport.local import LocalTransport


def check_settings(profile: DeviceProfile) -> None:
    if profile.settings:
        raise ProfileError(
            f"{profile.where('transport.' + sorted(profile.settings)[0])}: "
            "unknown field; the local transport takes none"
        )


def open_device(
    profile: DeviceProfile, resources: contextlib.ExitStack, board_reset: Callable[[], None] | None
) -> HostedDevice:
    check_settings(profile)
    transport = LocalTransport(profile.work_dir, profile.where("work_dir"))
    return HostedDevice(profile, transport, resources)
