"""linux-emu: an arm64 board that boots Debian's kernel from a flash of Debian's packages,
its power and boot driven through labgrid's QEMUDriver and a labgrid strategy.

The tests that boot a board are marked nightly (each boot is seconds of a core under
QEMU's TCG: README's test command is at its 7-minute bound); the nightly workflow runs
them (``pytest tests/system/test_linux_board.py -m nightly``), ci/test.sh the others.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import paramiko
import pytest
from prerequisites import require
from run_environment import run_environment

from harness.data.messages import Action, Outcome, Request
from harness.devices.hosted import HostedDevice
from harness.emulators.linux import LinuxEmulator, LinuxEmulatorError
from harness.emulators.linux_arch import ARM64
from harness.emulators.linux_image import (
    BoardImageError,
    ensure_image,
    lock_file,
    locked_packages,
)
from harness.profiles.device_profile import ProfileError, load_profile
from harness.runner import open_runner
from harness.shipped import devices_dir
from harness.transport.base import TransportError
from harness.transport.ssh import SshSettings, SshTransport


def _ssh(board: LinuxEmulator, command: str) -> str:
    """``command`` on the board through the harness's own SSH transport (host key pinned)."""
    transport = SshTransport(SshSettings(host=board.alias, ssh_config=board.ssh_config))
    try:
        result = transport.run(["sh", "-c", command], timeout=30)
    finally:
        transport.close()
    assert result.exit_code == 0, result
    return result.stdout.decode().strip()


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinuxEmulator]:
    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    emulator = LinuxEmulator(tmp_path_factory.mktemp("linux-emu"))
    emulator.start()
    yield emulator
    emulator.stop()


def test_the_lock_pins_the_kernel_and_every_package_by_its_digest():
    packages = locked_packages()
    assert packages[0].role == "kernel" and packages[0].name.startswith("linux-image-")
    names = {p.name for p in packages[1:]}
    assert {"libc6", "openssh-server", "busybox-static", "libstdc++6"} <= names
    assert all(len(p.sha256) == 64 and p.size > 0 for p in packages)


def test_a_lock_line_that_is_no_package_is_refused_naming_its_line(tmp_path: Path):
    lock = tmp_path / "board.lock"
    lines = lock_file().read_text().splitlines()
    lock.write_text("\n".join([*lines, "root libc6 2.36 debian pool/libc6.deb notahash 1"]))
    with pytest.raises(BoardImageError, match=rf"board.lock:{len(lines) + 1}: not 'ROLE NAME"):
        locked_packages(lock)


def test_the_profile_is_an_ssh_device_whose_emulator_is_the_board():
    profile = load_profile(str(devices_dir() / "linux-emu.yaml"))
    assert (profile.kind, profile.emulator, profile.abi) == ("ssh", "linux-emu", "aarch64")
    assert profile.agent.wrapper == ()  # no qemu-user: the agent runs on the board's kernel


def test_an_ssh_profile_may_not_ask_for_an_emulator_of_another_kind(tmp_path: Path):
    path = tmp_path / "board.yaml"
    path.write_text("transport:\n  kind: ssh\nemulator: mcu-emu\n")
    with pytest.raises(ProfileError, match="emulates a device reached over serial"):
        load_profile(str(path))


@pytest.mark.nightly
def test_the_board_boots_debians_kernel_and_serves_openssh_with_a_pinned_key(
    board: LinuxEmulator,
):
    image = ensure_image().description()
    assert _ssh(board, "uname -r; uname -m; id -un") == (
        f"{image['kernel']['release']}\naarch64\nroot"  # type: ignore[index]
    )
    # The kernel's own init is PID 1, and sshd is Debian's: a real boot, no qemu-user.
    assert _ssh(board, "cat /proc/1/comm; /usr/sbin/sshd -V 2>&1 | head -1").startswith(
        "init\nOpenSSH_9.2, OpenSSL 3.0"
    )
    assert "login:" in board.console_log.read_text(errors="replace")
    assert board.known_hosts.read_text().count("ssh-ed25519") == 1
    assert f"kernel={image['kernel']['release']}" in board.describe()  # type: ignore[index]


@pytest.mark.nightly
def test_another_host_key_is_refused_not_accepted(board: LinuxEmulator, tmp_path: Path):
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True
    )
    wrong = tmp_path / "known_hosts"
    other = (tmp_path / "other.pub").read_text().split()[:2]
    wrong.write_text(f"[{board.host}]:{board.port} {' '.join(other)}\n")
    done = subprocess.run(
        ["ssh", "-F", str(board.ssh_config), "-o", f"UserKnownHostsFile={wrong}",
         "-o", "BatchMode=yes", board.alias, "true"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 255 and "HOST IDENTIFICATION HAS CHANGED" in done.stderr


@pytest.mark.nightly
def test_a_reboot_boots_the_kernel_again_and_the_flash_keeps_its_files(board: LinuxEmulator):
    before = _ssh(board, "echo kept > ~/mark && sync && cat /proc/sys/kernel/random/boot_id")
    board.reboot()
    after = _ssh(board, "cat ~/mark /proc/sys/kernel/random/boot_id").splitlines()
    assert after[0] == "kept" and after[1] != before


@pytest.mark.nightly
def test_after_a_power_cut_the_board_boots_again_with_what_reached_its_flash(
    board: LinuxEmulator,
):
    _ssh(board, "echo synced > ~/synced && sync")
    board.cut_power()
    board.start()
    assert _ssh(board, "cat ~/synced") == "synced"


@pytest.mark.nightly
def test_a_board_whose_flash_is_damaged_fails_its_boot_with_the_console_log(tmp_path: Path):
    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    broken = LinuxEmulator(tmp_path, boot_timeout=20)
    tmp_path.mkdir(exist_ok=True)
    broken.flash.write_bytes(b"\0" * (1 << 20))  # no file system at all
    with pytest.raises(LinuxEmulatorError) as failure:
        broken.start()
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith("linux-emu: boot failed") and str(tmp_path) in message
    assert "et-init: boot failed: cannot mount the flash" in broken.console_log.read_text()


@pytest.mark.nightly
def test_the_wires_reboot_is_a_real_reboot_of_the_boards_kernel():
    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    device, runner = open_runner(load_profile(str(devices_dir() / "linux-emu.yaml")))
    try:
        board = device.emulator
        assert isinstance(board, LinuxEmulator)
        boot_id = _ssh(board, "cat /proc/sys/kernel/random/boot_id")
        runner.close()  # the runner's session; the REBOOT goes through one of its own
        session = device.start_session()
        assert "reboot" in str(session.request(Request(Action.HELLO)).fact("capabilities"))
        assert session.request(Request(Action.REBOOT)).outcome is Outcome.OK
        session.close()  # the agent's input ends: the kernel reboots
        board.await_reboot()
        assert _ssh(board, "cat /proc/sys/kernel/random/boot_id") != boot_id
        again = device.start_session()
        assert again.request(Request(Action.HELLO)).outcome is Outcome.OK  # from the flash
        again.close()
    finally:
        runner.close()
        device.close()


@pytest.mark.nightly
def test_after_a_power_cut_a_half_written_agent_is_found_by_its_digest_and_pushed_again():
    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    device, runner = open_runner(load_profile(str(devices_dir() / "linux-emu.yaml")))
    try:
        board = device.emulator
        assert isinstance(board, LinuxEmulator) and isinstance(device, HostedDevice)
        runner.close()
        agent = device.deploy_agent()  # known to be there, and whole
        # The flash keeps half of it, as when the power went while it was being written.
        _ssh(board, f"head -c 4096 {agent} > {agent}.half && mv {agent}.half {agent} && sync")
        board.cut_power()
        device.restart_emulator()  # as the farm does when a device is lost
        session = device.start_session()
        assert session.request(Request(Action.HELLO)).outcome is Outcome.OK
        session.close()
        local = device.agent_build().binary.stat().st_size
        assert _ssh(board, f"wc -c < {agent}") == str(local)
    finally:
        runner.close()
        device.close()


THREE_CASES = """\
import pytest

from harness.data.options import OptionsMap


@pytest.mark.parametrize("n", range(3))
def test_set(et, n):
    et.prepare(["ProbeA"])
    et.set(OptionsMap.from_dict({"ProbeA": {"k": n}})).raise_for_differences()
"""


@pytest.mark.nightly
def test_a_power_cut_while_a_program_is_pushed_leaves_it_to_be_pushed_again(
    monkeypatch: pytest.MonkeyPatch,
):
    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    device, runner = open_runner(load_profile(str(devices_dir() / "linux-emu.yaml")))
    try:
        board = device.emulator
        assert isinstance(board, LinuxEmulator) and isinstance(device, HostedDevice)
        runner.close()
        program = max(device.agent_build().libraries, key=lambda p: p.stat().st_size)  # MBs
        write, written = paramiko.sftp_file.SFTPFile.write, [0]

        def cut_halfway(handle: paramiko.sftp_file.SFTPFile, data: bytes) -> None:
            written[0] += len(data)
            if written[0] > program.stat().st_size // 2:
                board.cut_power()  # the board's power goes while the file is written
            write(handle, data)

        with monkeypatch.context() as patched:
            patched.setattr(paramiko.sftp_file.SFTPFile, "write", cut_halfway)
            with pytest.raises(TransportError):
                device.push_program(program)
        device.restart_emulator()  # as the farm does when a device is lost
        remote = device.push_program(program)
        digest = hashlib.sha256(program.read_bytes()).hexdigest()
        assert _ssh(board, f"sha256sum {remote}").split()[0] == digest
    finally:
        runner.close()
        device.close()


@pytest.mark.nightly
def test_a_power_cut_while_the_board_boots_for_its_first_test_boots_it_again(tmp_path: Path):
    """The chaos run's power cut (SIGKILL to qemu-system-aarch64) as soon as the board's
    QEMU runs for the run's bring-up: the farm boots it anew (an emulator restart) rather
    than quarantine it, and the tests pass."""
    from harness.chaos.faults import Scene, fault_kind
    from harness.lifecycle import process

    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    (tmp_path / "test_cases.py").write_text(THREE_CASES)
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "pytest", "test_cases.py", "-p", "no:cacheprovider",
            "--device", "linux-emu", "--results-dir", str(results)]  # fmt: skip
    with open(tmp_path / "run.log", "wb") as log:
        run = process.popen(argv, cwd=tmp_path, env=run_environment(), stdout=log, stderr=log)
        scene = Scene(run.pid, {"linux-emu": load_profile("linux-emu")}, None)
        cut: tuple[str, ...] = ()
        try:
            while not cut and run.poll() is None:  # QEMU is up: its boot has begun
                cut = fault_kind("cut-power").inject(scene, "linux-emu")
                with contextlib.suppress(subprocess.TimeoutExpired):
                    run.wait(0.1)
            returncode = run.wait(600)
        finally:
            run.kill()
            run.wait()
    output = (tmp_path / "run.log").read_text(errors="replace")
    assert cut and returncode == 0, output[-3000:]
    records = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["passed"] * 3, output[-3000:]
    (restart,) = records[0]["emulator_restarts"]
    assert restart.startswith("restart 1 of 2: bring-up failed: LinuxEmulatorError: linux-emu: ")
    assert "console log: " in restart and "quarantined" not in output


KILLED_AS_IT_STARTS = [
    # killed as it tells labgrid its version (QEMUDriver asks it as it is made)
    ('[ "$1" = -version ] && kill -9 $$\n', "power-on failed: ExecutionError: "),
    # killed before it connects to its serial console (labgrid waits for that in accept)
    ('[ "$1" = -version ] && exec qemu-system-aarch64 "$1"\nexit 1\n',
     "power-on failed: StrategyError: QEMU did not connect to its serial console"),
]  # fmt: skip


@pytest.mark.nightly
@pytest.mark.parametrize(("script", "failed"), KILLED_AS_IT_STARTS)
def test_a_qemu_killed_as_it_starts_fails_the_boot_in_one_line_not_hangs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, failed: str
):
    """A power cut as QEMU starts (here: a stand-in QEMU that ends) fails the board's
    power-on as an emulator error naming the step, in bounded time: the farm then boots
    the board again (a test error, or a hang, would end the run's tests on it)."""
    import threading

    import harness.emulators.linux_strategy as strategy

    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    fake = tmp_path / "qemu-system-aarch64"
    fake.write_text(f"#!/bin/sh\n{script}")
    fake.chmod(0o755)
    monkeypatch.setattr(strategy, "SERIAL_CONNECT_TIMEOUT", 1.0, raising=False)
    board, errors = LinuxEmulator(tmp_path / "board", arch=replace(ARM64, qemu=str(fake))), []

    def start() -> None:
        try:
            board.start()
        except Exception as exc:
            errors.append(exc)

    starting = threading.Thread(target=start, daemon=True)
    starting.start()
    starting.join(60)
    assert not starting.is_alive(), "the boot hangs waiting for QEMU's serial console"
    (error,) = errors
    assert isinstance(error, LinuxEmulatorError), repr(error)
    message = str(error)
    assert message.startswith(f"linux-emu: {failed}"), message
    assert "\n" not in message and str(board.console_log) in message
