"""The emulated lab's places (:mod:`harness.emulators.labgrid_lab`): each exported
device's place, the exporter group its resources are in, and the tags the lab's admin
sets on it (what the shipped lab profiles ask for)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.emulators.lab_devices import EmulatedBoard, EmulatedPhone, PoweredLinuxBoard
from harness.emulators.ssh import SshEmulator

TAGS = {"kind": "mcu", "pool": "lab", "et_health": "ok"}
SSH_TAGS = {"kind": "linux", "pool": "lab", "et_health": "ok"}
ANDROID_TAGS = {"kind": "android", "pool": "lab", "et_health": "ok"}
BOOT_TAGS = {"kind": "linux_board", "pool": "lab", "et_health": "ok"}
GROUP = "mcu"
SSH_GROUP = "ssh"
ANDROID_GROUP = "android"
BOOT_GROUP = "boot"


@dataclass(frozen=True)
class LabPlace:
    name: str
    exporter: str
    host: str
    board: EmulatedBoard


@dataclass(frozen=True)
class SshPlace:
    name: str
    exporter: str
    board: SshEmulator


@dataclass(frozen=True)
class LinuxBoardPlace:
    name: str
    exporter: str
    board: PoweredLinuxBoard


@dataclass(frozen=True)
class AndroidPlace:
    name: str
    exporter: str
    phone: EmulatedPhone

    @property
    def tags(self) -> dict[str, str]:
        """What the lab's admin sets on the place: the pool's tags and where the phone is."""
        server = f"127.0.0.1:{self.phone.server.port}"
        return {**ANDROID_TAGS, "adb_serial": self.phone.serial, "adb_server": server}
