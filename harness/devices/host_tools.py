"""What the OS must provide for a device: the compilers, cross toolchains, QEMU, ``adb``
and OpenSSH the harness runs on this machine to build its agent, start its emulator or
reach it.

Each device kind's module declares what its devices need (its ``host_tools(profile)``,
built from :func:`agent_tools` for a hosted agent and its emulator's own tools); they are
checked when the device is opened (:func:`check_host_tools`, before anything starts): a
missing one fails that device with one line naming the tool and the Debian package that
provides it. One the device can do without (ssh-emu's namespace tools: it then listens on
loopback, docs/ssh-emu.md) is listed, not required. ``et-harness doctor`` lists them all
(:func:`harness.devices.bring_up.needed_host_tools`). A board virtualized by KVM
(linux-kvm) also needs a usable ``/dev/kvm`` (:func:`check_kvm`, the same one line).
``ci/setup.sh`` installs every one.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
from collections.abc import Iterable
from dataclasses import dataclass

from harness.devices.base import DeviceSetupError
from harness.profiles.device_profile import DeviceProfile


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


class KvmUnusable(MissingHostTool):
    """A device that runs under KVM, on a machine whose ``/dev/kvm`` is absent or unusable."""


KVM_DEVICE = "/dev/kvm"
_KVM_GET_API_VERSION, _KVM_CREATE_VM, _KVM_API_VERSION = 0xAE00, 0xAE01, 12
_CPUINFO_BYTES = 64 << 10  # the first processor's flags are in its first few KiB


_NATIVE_BUILD = (
    HostTool("g++", "g++", "builds the agent"),
    HostTool("make", "make", "builds the agent"),
)
_ARM64_BUILD = (
    HostTool("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu", "builds the arm64 agent"),
)
QEMU_USER = HostTool("qemu-aarch64", "qemu-user", "runs the arm64 agent on this machine")
_VALGRIND = HostTool("valgrind", "valgrind", "runs the agent under helgrind, drd or memcheck")
_ARM64_ABIS = ("aarch64", "arm64-v8a")
# Wrappers the harness knows (agent.wrapper's first word), run on this machine for a
# local or emulated device.
_WRAPPERS = {tool.command: tool for tool in (QEMU_USER, _VALGRIND)}


def agent_tools(
    profile: DeviceProfile, *, runs_here: bool, arm64: bool = False
) -> tuple[HostTool, ...]:
    """What building and starting a hosted agent takes on this machine: the compilers
    (unless the agent is prebuilt; the arm64 cross compiler for an arm64 ABI or when
    ``arm64``), the agent's known wrapper if the agent ``runs_here``, and valgrind for a
    race detector that needs it."""
    needed: list[HostTool] = []
    if profile.agent.prebuilt is None:
        needed += _NATIVE_BUILD  # the host agent, and the arm64 one's build tools
        if arm64 or profile.abi in _ARM64_ABIS:
            needed += _ARM64_BUILD
    if profile.agent.wrapper and runs_here:
        wrapper = _WRAPPERS.get(os.path.basename(profile.agent.wrapper[0]))
        if wrapper is not None:
            needed.append(wrapper)
    if profile.agent.race_detector is not None and profile.agent.race_detector.value != "tsan":
        needed.append(_VALGRIND)
    return tuple(needed)


def check_host_tools(profile: DeviceProfile, tools: Iterable[HostTool]) -> None:
    """:class:`MissingHostTool` naming the first of ``tools`` (what ``profile``'s device
    needs) that it cannot do without and this machine lacks, and its Debian package."""
    missing = [tool for tool in tools if not tool.without and not tool.found()]
    if missing:
        tool, more = missing[0], len(missing) - 1
        others = f" (and {more} more: et-harness doctor lists them)" if more else ""
        raise MissingHostTool(
            f"{profile.name}: {tool.command} ({tool.purpose}) is not on PATH; install Debian's "
            f"{tool.package} (apt-get install {tool.package}){others}"
        )


def kvm_problem(device: str | None = None, cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """Why an x86_64 guest cannot run under KVM here, in a few words; None if it can:
    ``device`` (:data:`KVM_DEVICE`) opens and makes a virtual machine, on an x86_64
    machine whose CPU has hardware virtualization (vmx or svm; without it, a KVM in
    software, such as PVM, runs only guest kernels made for it)."""
    device = device or KVM_DEVICE
    try:
        fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return f"{device} is absent: this machine offers no KVM (load kvm_intel or kvm_amd)"
    except OSError as exc:
        return f"{device} cannot be opened ({exc.strerror}): add this user to group kvm"
    try:
        if fcntl.ioctl(fd, _KVM_GET_API_VERSION) != _KVM_API_VERSION:
            return f"{device} speaks another KVM API than version {_KVM_API_VERSION}"
        os.close(fcntl.ioctl(fd, _KVM_CREATE_VM, 0))
    except OSError as exc:
        return f"{device} makes no virtual machine ({exc.strerror})"
    finally:
        os.close(fd)
    if platform.machine() != "x86_64":
        return f"this machine is {platform.machine()}, not x86_64: its KVM runs no x86_64 guest"
    return cpu_virtualization_problem(device, cpuinfo)


def cpu_virtualization_problem(device: str, cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """Why the KVM at ``device`` runs no unmodified kernel: the CPU (``cpuinfo``) has no
    hardware virtualization (vmx or svm), so it is a KVM in software such as PVM; None if
    it has."""
    try:
        with open(cpuinfo, "rb") as info:
            flags = info.read(_CPUINFO_BYTES).split()
    except OSError as exc:
        return f"{cpuinfo} cannot be read ({exc.strerror}): whether the CPU virtualizes is unknown"
    if b"vmx" not in flags and b"svm" not in flags:
        return (
            f"{device} is there but the CPU has no hardware virtualization (no vmx or svm "
            "flag): its KVM is one in software (such as PVM), which boots no unmodified kernel"
        )
    return None


def check_kvm(profile: DeviceProfile) -> None:
    """:class:`KvmUnusable` in one line if ``profile``'s device cannot run under KVM here."""
    problem = kvm_problem()
    if problem is not None:
        raise KvmUnusable(
            f"{profile.name}: {problem}; run it on a machine with KVM, or use linux-emu "
            "(the arm64 board, under QEMU's TCG)"
        )
