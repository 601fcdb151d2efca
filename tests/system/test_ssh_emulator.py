"""ssh-emu: the real OpenSSH server as an emulated Linux board, checked with the real ssh client."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from prerequisites import require

from harness.emulators.ssh import Isolation, NetworkNamespace, SshEmulator, SshEmulatorError
from harness.lifecycle import owner
from harness.lifecycle.reap import OwnerRecord


@pytest.fixture(autouse=True)
def _prerequisites() -> None:
    require("/usr/sbin/sshd", root=True)


REPO = Path(__file__).resolve().parents[2]


def _ssh(emulator: SshEmulator, *command: str) -> subprocess.CompletedProcess[str]:
    """The real OpenSSH client, with only the files the emulator wrote."""
    return subprocess.run(
        ["ssh", "-F", str(emulator.ssh_config), "-o", "BatchMode=yes", emulator.alias, *command],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for init to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _netns_names() -> set[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in listing.stdout.splitlines() if line.strip()}


def test_board_in_its_own_namespace_serves_ssh_and_cleans_up(tmp_path: Path) -> None:
    emulator = SshEmulator(tmp_path / "board", isolation=Isolation.NETNS)
    with emulator:
        assert emulator.netns is not None and emulator.netns.name in _netns_names()
        done = _ssh(emulator, "id -un; uname -m; cat /proc/net/dev")
        assert done.returncode == 0, done.stderr
        user, machine, *netdev = done.stdout.splitlines()
        assert (user, machine) == (emulator.user, os.uname().machine)
        interfaces = {line.split(":")[0].strip() for line in netdev if ":" in line}
        assert interfaces == {"lo"}, "the board sees only its own loopback"
        pids = emulator.pids()
        authorized = emulator.authorized_keys_file
        assert authorized is not None and authorized.is_file()
        assert authorized.parent == Path(f"~{emulator.user}/.ssh").expanduser()
        namespace = emulator.netns.name
    assert namespace not in _netns_names()
    assert not [pid for pid in pids if _alive(pid)]
    assert not authorized.exists()


def test_loopback_board_listens_on_a_free_port(tmp_path: Path) -> None:
    with SshEmulator(tmp_path / "board", isolation=Isolation.LOOPBACK) as emulator:
        assert emulator.netns is None and emulator.port not in (0, 22)
        with socket.create_connection((emulator.host, emulator.port), timeout=5) as sock:
            assert sock.recv(64).startswith(b"SSH-2.0-OpenSSH")
        done = _ssh(emulator, "echo", "hello")
        assert (done.returncode, done.stdout) == (0, "hello\n"), done.stderr


def test_a_daemon_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        emulator = SshEmulator(tmp_path, isolation=Isolation.LOOPBACK, port=port)
        with pytest.raises(SshEmulatorError, match="Address already in use"):
            emulator.start()
    assert emulator.pids() == []


def test_host_key_is_kept_across_restarts(tmp_path: Path) -> None:
    with SshEmulator(tmp_path) as first:
        fingerprint = first.host_key_fingerprint
    with SshEmulator(tmp_path) as second:
        assert second.host_key_fingerprint == fingerprint
        assert (
            fingerprint
            in subprocess.run(
                ["ssh-keygen", "-lf", str(second.host_key.with_suffix(".pub"))],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert _ssh(second, "true").returncode == 0


def test_two_boards_share_a_namespace(tmp_path: Path) -> None:
    with (
        NetworkNamespace() as netns,
        SshEmulator(tmp_path / "a", netns=netns, alias="a") as a,
        SshEmulator(tmp_path / "b", netns=netns, alias="b", port=2200) as b,
    ):
        assert (a.port, b.port) == (22, 2200)
        assert _ssh(a, "true").returncode == 0 and _ssh(b, "true").returncode == 0
    assert netns.name not in _netns_names()


def test_command_line_from_a_fresh_run_dir(tmp_path: Path) -> None:
    """``et-harness emu ssh-emu`` with an empty /run (no /run/sshd, no /run/netns), as on
    a machine that never ran sshd: a private mount namespace. It prints the board's ssh
    config, which the real client uses as it is; SIGTERM brings the board down."""
    script = f"mount -t tmpfs tmpfs /run && exec {sys.executable} -m harness.cli emu ssh-emu"
    process = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        cwd=REPO,
        env={**os.environ, "ET_HARNESS_CACHE": str(tmp_path / "cache")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        banner = _read_until(process, b"Ctrl-C brings it down.", timeout=30).decode()
        settings = dict(
            line.strip().split(": ", 1) for line in banner.splitlines() if line.startswith("  ")
        )
        assert settings["host"] == "ssh-emu"
        assert Path(settings["ssh_config"]).is_relative_to(tmp_path / "cache" / "emulators")
        # The client runs in the board's mount namespace: its netns is in that /run.
        ssh = ["ssh", "-F", settings["ssh_config"], "-o", "BatchMode=yes", "ssh-emu", "echo ok"]
        done = subprocess.run(
            ["nsenter", "--target", str(process.pid), "--mount", *ssh],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0, process.stderr.read() if process.stderr else ""
    assert process.stdout is not None and b"ssh-emu is down" in process.stdout.read()
    assert not (tmp_path / "cache" / "emulators").exists() or not any(
        (tmp_path / "cache" / "emulators").iterdir()
    )


def _read_until(process: subprocess.Popen[bytes], marker: bytes, timeout: float) -> bytes:
    assert process.stdout is not None
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while marker not in seen:
            if not selector.select(timeout):
                raise AssertionError(f"no {marker!r} within {timeout} s; got {seen!r}")
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                err = process.stderr.read() if process.stderr else b""
                raise AssertionError(f"emulator exited: {seen!r} {err!r}")
            seen += chunk
    return seen


def test_the_namespace_and_key_are_in_the_ownership_record_while_the_board_runs(
    tmp_path: Path,
) -> None:
    def record() -> OwnerRecord:
        return OwnerRecord.from_json(owner.current().record_path.read_text())

    with SshEmulator(tmp_path / "board", isolation=Isolation.NETNS) as emulator:
        assert emulator.netns is not None and emulator.authorized_keys_file is not None
        namespace, key = emulator.netns.name, emulator.authorized_keys_file
        daemon = emulator.pids()[0]
        held = record()
        assert namespace in held.netns and str(key) in held.paths
        assert daemon in {p.pid for p in held.processes}
    after = record()
    assert namespace not in after.netns and str(key) not in after.paths
    assert daemon not in {p.pid for p in after.processes}
