"""Device kind ``adb``: an Android device through the real adb client; emulator ``adb-emu``."""

from __future__ import annotations

import os

from harness.devices.acquired_place import LabResources
from harness.devices.base import OpenContext
from harness.devices.host_tools import QEMU_USER, HostTool, agent_tools
from harness.devices.hosted import HostedDevice, emulator_home, with_settings
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.kinds import DeviceKind, LabAddress, Settings
from harness.profiles.validator import parse_settings, refuse
from harness.transport.adb import ADB_ENV, AdbSettings, AdbTransport
from harness.untrusted.value_rules import check_host, check_port, check_word, split_host_port

# The transport fields of an adb profile and the rule each value must pass.
FIELDS = {
    "serial": lambda v: check_word(v, "the device's serial, as `adb devices` lists it"),
    "server_host": check_host,
    "server_port": check_port,
    "connect": split_host_port,
}
# The place tags a lab phone's address comes from: labgrid has no adb resource (its
# Android resources are for fastboot mode), so the lab's admin names the phone's serial
# and the adb server it is attached to (on the exporter host), docs/device-farm.md.
SERIAL_TAG = "adb_serial"
SERVER_TAG = "adb_server"


_UTIL_LINUX = HostTool("unshare", "util-linux", "gives the emulator namespaces of its own")


def host_tools(profile: DeviceProfile) -> tuple[HostTool, ...]:
    """The real adb client always; adb-emu's phone runs the arm64 agent here under
    qemu-user, in namespaces of its own."""
    emulated = profile.emulator is not None
    adb = HostTool(os.environ.get(ADB_ENV) or "adb", "adb", "reaches Android devices")
    emulator = (_UTIL_LINUX, QEMU_USER) if emulated else ()
    return (*agent_tools(profile, runs_here=emulated, arm64=emulated), adb, *emulator)


def adb_settings(profile: DeviceProfile) -> AdbSettings:
    """The profile's transport fields, checked, with the profile's timeouts."""
    where = profile.where("transport")
    if "adb" in profile.settings:
        raise refuse(
            where,
            "adb",
            "a profile may not choose the adb client (it is a program "
            f"run on this machine); remove the field and put adb on PATH or set "
            f"{ADB_ENV}=/path/to/adb in your environment",
        )
    return parse_settings(
        AdbSettings,
        profile.settings,
        where,
        fields=FIELDS,
        work_dir=profile.work_dir,
        query_timeout=profile.timeouts.connect,
        transfer_timeout=profile.timeouts.command,
    )


def check_settings(profile: DeviceProfile) -> None:
    adb_settings(profile)


def lab_settings(profile: DeviceProfile, resources: LabResources, place: str) -> dict[str, object]:
    """The phone of the place's tag ``adb_serial`` through the adb server of ``adb_server``
    (``HOST:PORT``), each checked with the profile's rule for the field it fills."""
    serial = resources.tag(place, SERIAL_TAG, FIELDS["serial"], "SERIAL")
    host, port = resources.tag(place, SERVER_TAG, split_host_port, "HOST:5037")
    return {"serial": serial, "server_host": host, "server_port": port}


def open_device(profile: DeviceProfile, context: OpenContext) -> HostedDevice:
    resources, emulator = context.resources, None
    if profile.emulator is not None:
        from harness.emulators.adb.phone import EmulatedPhone

        emulator = EmulatedPhone(emulator_home(profile, resources))
        emulator.start()  # on failure, it stops what it started
        resources.callback(emulator.stop)
        profile = with_settings(profile, **emulator.settings)
    return HostedDevice(profile, AdbTransport(adb_settings(profile)), resources, emulator)


def lock_key(settings: Settings) -> str:
    """One phone, whichever profile names it: its adb server and serial (or address)."""
    server = f"{settings.get('server_host', 'localhost')}:{settings.get('server_port', '')}"
    target = settings.get("serial") or settings.get("connect") or "the only device"
    return f"adb:{server}/{target}"


KIND = DeviceKind(
    name="adb",
    settings=AdbSettings,
    emulator="adb-emu",
    emulator_fields=("connect", "server_port"),
    lock_key=lock_key,
    lab=LabAddress(
        fields=("serial", "server_host", "server_port", "connect"),
        placeholder=(("serial", "lab"), ("server_host", "127.0.0.1"), ("server_port", 5037)),
    ),
)
