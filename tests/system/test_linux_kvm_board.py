"""linux-kvm: linux-emu's x86_64 twin, Debian's amd64 kernel and userland booted under
``qemu-system-x86_64 -M q35`` with KVM, the host agent on the board's own kernel.

The tests that boot it are marked nightly (the nightly workflow's board job runs them);
where this machine has no usable KVM they skip, saying why (as the device's bring-up
says in its one line).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prerequisites import require

from harness.data.messages import Action, Request
from harness.devices import host_tools
from harness.devices.bring_up import needed_host_tools, open_device
from harness.devices.host_tools import (
    KvmUnusable,
    MissingHostTool,
    cpu_virtualization_problem,
    kvm_problem,
)
from harness.devices.hosted import HostedDevice
from harness.devices.ssh import BOOTED_BOARDS
from harness.emulators.linux import LinuxEmulator
from harness.emulators.linux_arch import AMD64, ARM64, BOARDS
from harness.emulators.linux_image import board_file, ensure_image, image_dir, lock_file
from harness.emulators.linux_image import locked_packages as packages_of
from harness.profiles.device_profile import load_profile
from harness.runner import open_runner
from harness.shipped import devices_dir

TOOLS = ("qemu-system-x86_64", "ssh-keygen", "mke2fs", "dpkg-deb")


def _require_kvm() -> None:
    require(*TOOLS)
    problem = kvm_problem()
    if problem is not None:
        pytest.skip(f"linux-kvm: {problem}")


def _ssh(board: LinuxEmulator, command: str) -> str:
    done = subprocess.run(
        ["ssh", "-F", str(board.ssh_config), "-o", "BatchMode=yes", board.alias, command],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinuxEmulator]:
    _require_kvm()
    emulator = LinuxEmulator(tmp_path_factory.mktemp("linux-kvm"), arch=AMD64)
    emulator.start()
    yield emulator
    emulator.stop()


def test_the_amd64_lock_pins_debians_amd64_kernel_of_the_arm64_boards_release():
    amd64, arm64 = packages_of(lock_file(AMD64)), packages_of(lock_file(ARM64))
    assert amd64[0].name == arm64[0].name.replace("-arm64", "-amd64")
    assert amd64[0].version == arm64[0].version
    assert [p.name for p in amd64[1:]] == [p.name for p in arm64[1:]]  # the same userland
    assert all(p.path.endswith("_amd64.deb") and len(p.sha256) == 64 for p in amd64)
    assert image_dir(AMD64).name.startswith("debian-amd64-")
    assert image_dir(ARM64).name.startswith("debian-arm64-")


def test_the_boards_files_are_filled_in_for_each_architecture():
    assert b"\nttyS0::respawn:/sbin/getty -L 0 ttyS0 vt100\n" in board_file("inittab", AMD64)
    assert b"\nttyAMA0::respawn:/sbin/getty -L 0 ttyAMA0 vt100\n" in board_file("inittab", ARM64)
    assert b"for m in virtio_ring virtio virtio_pci_modern_dev " in board_file("init", AMD64)
    assert b"for m in virtio_mmio virtio_blk " in board_file("init", ARM64)
    assert b"hostname linux-kvm\n" in board_file("rcS", AMD64)
    for arch in (AMD64, ARM64):
        for name in ("init", "rcS", "inittab", "profile", "sshd_config"):
            assert re.search(rb"@[A-Z]+@", board_file(name, arch)) is None  # all filled in


def test_the_profile_is_an_x86_64_board_that_runs_the_host_agent_under_kvm():
    profile = load_profile(str(devices_dir() / "linux-kvm.yaml"))
    assert (profile.kind, profile.emulator, profile.abi) == ("ssh", "linux-kvm", "x86_64")
    assert profile.agent.wrapper == ()
    commands = [tool.command for tool in needed_host_tools(profile)]
    assert "qemu-system-x86_64" in commands and "aarch64-linux-gnu-g++" not in commands
    assert BOOTED_BOARDS == tuple(BOARDS)  # the ssh kind opens every board of the table


def test_without_kvm_the_boards_bring_up_fails_in_one_line_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(host_tools, "KVM_DEVICE", str(tmp_path / "kvm"))
    with pytest.raises(KvmUnusable) as failure:
        open_device(load_profile(str(devices_dir() / "linux-kvm.yaml")))
    message = str(failure.value)
    assert "\n" not in message and message.startswith(f"linux-kvm: {tmp_path}/kvm is absent")
    assert "use linux-emu" in message
    assert isinstance(failure.value, MissingHostTool)  # a run does not boot it again


def test_a_kvm_in_software_is_no_kvm_for_the_board(tmp_path: Path):
    """Without vmx or svm, /dev/kvm is a KVM in software (such as PVM): it boots no
    unmodified kernel, Debian's included."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 svm\n")
    assert cpu_virtualization_problem("/dev/kvm", str(cpuinfo)) is None
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 hypervisor\n")
    problem = cpu_virtualization_problem("/dev/kvm", str(cpuinfo))
    assert "no hardware virtualization" in str(problem)


@pytest.mark.nightly
def test_the_board_boots_debians_amd64_kernel_under_kvm(board: LinuxEmulator):
    release = ensure_image(AMD64).description()["kernel"]["release"]  # type: ignore[index]
    assert _ssh(board, "uname -r; uname -m; cat /proc/1/comm; id -un") == (
        f"{release}\nx86_64\ninit\nroot"
    )
    # The CPU is virtualized by KVM, not emulated: the guest's clock is KVM's own.
    assert "kvm-clock" in _ssh(
        board, "cat /sys/devices/system/clocksource/clocksource0/available_clocksource"
    )
    assert f"kernel={release}" in board.describe() and "debian-amd64-" in board.describe()


@pytest.mark.nightly
def test_the_host_agent_runs_on_the_boards_own_kernel():
    _require_kvm()
    device, runner = open_runner(load_profile(str(devices_dir() / "linux-kvm.yaml")))
    try:
        board = device.emulator
        assert isinstance(board, LinuxEmulator) and board.arch is AMD64
        assert isinstance(device, HostedDevice)
        runner.close()
        session = device.start_session()
        hello = session.request(Request(Action.HELLO))
        assert hello.fact("abi") == "x86_64" and "reboot" in str(hello.fact("capabilities"))
        # The agent answering is a process of the board's kernel, started from its flash.
        running = _ssh(board, "for p in $(pidof et-agent); do readlink /proc/$p/exe; done")
        assert device.deploy_agent() in running.splitlines()
        session.close()
    finally:
        runner.close()
        device.close()
