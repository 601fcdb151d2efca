"""What the OS must provide for a device: the compilers, cross toolchains, QEMU, ``adb``
and OpenSSH the harness runs on this machine to build its agent, start its emulator or
reach it.

They are checked when the device is opened (:func:`check_host_tools`, before anything
starts): a missing one fails that device with one line naming the tool and the Debian
package that provides it. One the device can do without (ssh-emu's namespace tools: it
then listens on loopback, docs/ssh-emu.md) is listed, not required. ``et-harness doctor``
lists them all (:func:`host_tools`).
``ci/setup.sh`` installs every one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from harness.config.profile import DeviceProfile
from harness.devices.base import DeviceSetupError


@dataclass(frozen=True)
class HostTool:
    """A program the harness runs on this machine, and the Debian package that has it."""

    command: str
    package: str
    purpose: str
    without: str = ""  # what the device does without it; "" when it cannot do without

    def found(self) -> bool:
        return shutil.which(self.command) is not None


class MissingHostTool(DeviceSetupError):
    """A program a device needs on this machine is not on PATH."""


_NATIVE_BUILD = (
    HostTool("g++", "g++", "builds the agent"),
    HostTool("make", "make", "builds the agent"),
)
_ARM64_BUILD = (
    HostTool("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu", "builds the arm64 agent"),
)
_QEMU_USER = HostTool("qemu-aarch64", "qemu-user", "runs the arm64 agent on this machine")
_VALGRIND = HostTool("valgrind", "valgrind", "runs the agent under helgrind, drd or memcheck")
_UTIL_LINUX = HostTool("unshare", "util-linux", "gives the emulator namespaces of its own")
_SSH_EMU = (
    HostTool("/usr/sbin/sshd", "openssh-server", "is the emulated board's sshd"),
    HostTool("ssh-keygen", "openssh-client", "makes the emulated board's keys"),
    HostTool("useradd", "passwd", "makes the emulated board's user"),
    HostTool(
        "ip", "iproute2", "gives the emulated board a network namespace", "listens on loopback"
    ),
    HostTool("socat", "socat", "connects to the emulated board's namespace", "listens on loopback"),
)
_LINUX_EMU = (
    HostTool("qemu-system-aarch64", "qemu-system-arm", "emulates the arm64 board"),
    HostTool("ssh-keygen", "openssh-client", "makes the emulated board's keys"),
    HostTool("mke2fs", "e2fsprogs", "makes the board's flash image"),
    HostTool("dpkg-deb", "dpkg", "unpacks the board's Debian packages"),
)
_MCU_EMU = (
    HostTool("qemu-system-arm", "qemu-system-arm", "emulates the Cortex-M board"),
    HostTool("arm-none-eabi-gcc", "gcc-arm-none-eabi", "builds the MCU firmware"),
    HostTool("arm-none-eabi-g++", "gcc-arm-none-eabi", "builds the MCU firmware"),
)
_ARM64_ABIS = ("aarch64", "arm64-v8a")
# Wrappers the harness knows (agent.wrapper's first word), run on this machine for a
# local or emulated device.
_WRAPPERS = {tool.command: tool for tool in (_QEMU_USER, _VALGRIND)}


def _adb() -> HostTool:
    return HostTool(os.environ.get("ET_HARNESS_ADB") or "adb", "adb", "reaches Android devices")


def host_tools(profile: DeviceProfile) -> tuple[HostTool, ...]:
    """Every program ``profile``'s device needs on this machine, each once."""
    needed: list[HostTool] = []
    emulated = profile.emulator is not None
    if profile.kind in ("local", "ssh", "adb") and profile.agent.prebuilt is None:
        needed += _NATIVE_BUILD  # the host agent, and the arm64 one's build tools
        if profile.abi in _ARM64_ABIS or profile.emulator in ("ssh-emu", "adb-emu"):
            needed += _ARM64_BUILD
    if profile.agent.wrapper and (emulated or profile.kind == "local"):
        wrapper = _WRAPPERS.get(os.path.basename(profile.agent.wrapper[0]))
        if wrapper is not None:
            needed.append(wrapper)
    if profile.agent.race_detector is not None and profile.agent.race_detector.value != "tsan":
        needed.append(_VALGRIND)
    if profile.emulator == "ssh-emu":
        needed += _SSH_EMU
    if profile.emulator == "linux-emu":
        needed += _LINUX_EMU
    if profile.kind == "adb":
        needed.append(_adb())
    if profile.emulator == "adb-emu":
        needed += (_UTIL_LINUX, _QEMU_USER)
    if profile.emulator == "mcu-emu":
        needed += _MCU_EMU
    return tuple(dict.fromkeys(needed))


def check_host_tools(profile: DeviceProfile) -> None:
    """:class:`MissingHostTool` naming the first program ``profile``'s device cannot do
    without that this machine lacks, and its Debian package."""
    missing = [tool for tool in host_tools(profile) if not tool.without and not tool.found()]
    if missing:
        tool, more = missing[0], len(missing) - 1
        others = f" (and {more} more: et-harness doctor lists them)" if more else ""
        raise MissingHostTool(
            f"{profile.name}: {tool.command} ({tool.purpose}) is not on PATH; install Debian's "
            f"{tool.package} (apt-get install {tool.package}){others}"
        )
