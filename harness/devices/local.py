"""Device kind ``local``: this machine, its agent run as a child process."""

from __future__ import annotations

from harness.config.kinds import DeviceKind
from harness.config.profile import DeviceProfile
from harness.config.settings import refuse
from harness.devices.base import OpenContext
from harness.devices.hosted import HostedDevice
from harness.transport.local import LocalTransport
from harness.untrusted.reading import brief_plain


def check_settings(profile: DeviceProfile) -> None:
    if profile.settings:  # keys as the file gives them: any type, any characters
        first = sorted(profile.settings, key=str)[0]
        raise refuse(
            profile.where("transport"),
            brief_plain(first),
            "unknown field; the local transport takes none",
        )


def open_device(profile: DeviceProfile, context: OpenContext) -> HostedDevice:
    check_settings(profile)
    transport = LocalTransport(profile.work_dir, profile.where("work_dir"))
    return HostedDevice(profile, transport, context.resources)


KIND = DeviceKind(name="local", settings=None, on_this_machine=True)
