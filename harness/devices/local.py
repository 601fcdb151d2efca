"""Device kind ``local``: this machine, its agent run as a child process."""

from __future__ import annotations

from harness.devices.base import OpenContext
from harness.devices.host_tools import HostTool, agent_tools
from harness.devices.hosted import HostedDevice
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.kinds import DeviceKind
from harness.profiles.validator import check_known
from harness.transport.local import LocalTransport


def check_settings(profile: DeviceProfile) -> None:
    where = profile.where("transport")
    check_known(profile.settings, (), where, none_allowed="the local transport takes none")


def host_tools(profile: DeviceProfile) -> tuple[HostTool, ...]:
    return agent_tools(profile, runs_here=True)


def open_device(profile: DeviceProfile, context: OpenContext) -> HostedDevice:
    check_settings(profile)
    transport = LocalTransport(profile.work_dir, profile.where("work_dir"))
    return HostedDevice(profile, transport, context.resources)


KIND = DeviceKind(name="local", settings=None, on_this_machine=True)
