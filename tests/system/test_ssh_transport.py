"""SshTransport against the real OpenSSH server (ssh-emu boards in network namespaces)."""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prerequisites import require

from harness.devices.ssh import ssh_settings
from harness.emulators.ssh import Isolation, NetworkNamespace, SshEmulator
from harness.profiles.device_profile import ProfileError, parse_profile
from harness.transport.base import DeviceUnavailable, TransportLost, TransportTimeout
from harness.transport.private_dir import UnsafeDirectoryError
from harness.transport.ssh import (
    HostKeyMismatch,
    HostKeyUnknown,
    SshConfigError,
    SshSettings,
    SshTransport,
)


@pytest.fixture(autouse=True)
def _prerequisites() -> None:
    require("/usr/sbin/sshd", root=True)


HOSTILE_ARGS = [
    "",
    "two words",
    "it's",
    'say "hi"',
    "$(touch /tmp/et-pwned)",
    "`id`",
    "a; rm -rf /tmp/et-nothing",
    "line\nbreak\r\n",
    "tab\there",
    "-n",
    "--help",
    "*",
    "~",
    "$HOME ${PATH}",
    "\\",
    "'\"'\"'",
    "ünïcödé ✓ 日本",
    "!$&|<>(){}[]#",
    "\x1b[31m",
]


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshEmulator]:
    with SshEmulator(tmp_path_factory.mktemp("board"), isolation=Isolation.NETNS) as emulator:
        yield emulator


@pytest.fixture
def ssh(board: SshEmulator) -> Iterator[SshTransport]:
    transport = SshTransport(board.profile())
    yield transport
    transport.close()


@pytest.fixture
def own_board(tmp_path: Path) -> Iterator[SshEmulator]:
    """A board this test may kill."""
    with SshEmulator(tmp_path / "own", isolation=Isolation.NETNS) as emulator:
        yield emulator


LOGIN = "Accepted publickey"
LOGOUT = "Connection closed by"  # logged at LogLevel VERBOSE, with or without login
REFUSED_BEFORE_LOGIN = "[preauth]"  # sshd's line for a client that left before logging in


# -- host keys ---------------------------------------------------------------


def test_connects_with_known_hosts_from_the_ssh_config(board: SshEmulator) -> None:
    transport = SshTransport(board.profile())
    try:
        assert transport.run(["id", "-un"], timeout=10).stdout == b"etdevice\n"
    finally:
        transport.close()


def test_connects_with_a_known_hosts_path_from_the_profile(
    board: SshEmulator, tmp_path: Path
) -> None:
    known = tmp_path / "known"
    known.write_text(board.known_hosts.read_text())
    transport = SshTransport(board.profile(known_hosts=known))
    try:
        assert transport.run(["true"], timeout=10).exit_code == 0
    finally:
        transport.close()


@pytest.mark.parametrize("pin", ["key", "fingerprint"])
def test_connects_with_a_pinned_host_key(board: SshEmulator, tmp_path: Path, pin: str) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    host_key = board.host_public_key if pin == "key" else board.host_key_fingerprint
    transport = SshTransport(board.profile(known_hosts=empty, host_key=host_key))
    try:
        assert transport.run(["true"], timeout=10).exit_code == 0
    finally:
        transport.close()


def test_unknown_host_key_is_refused_with_its_fingerprint(
    own_board: SshEmulator, tmp_path: Path
) -> None:
    board = own_board
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyUnknown) as refused:
        SshTransport(board.profile(known_hosts=empty)).connect()
    message = str(refused.value)
    assert board.host_key_fingerprint in message
    assert f'host_key: "{board.host_public_key}"' in message
    assert board.wait_for_log(REFUSED_BEFORE_LOGIN)
    assert board.log_count(LOGIN) == 0, "no login may happen before the key is trusted"


def test_changed_host_key_is_refused(own_board: SshEmulator, tmp_path: Path) -> None:
    board = own_board
    impostor = tmp_path / "impostor"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(impostor)], check=True)
    wrong_key = " ".join(impostor.with_suffix(".pub").read_text().split()[:2])
    known = tmp_path / "known"
    known.write_text(f"{board.known_hosts_name} {wrong_key}\n")
    for profile in (
        board.profile(known_hosts=known),
        board.profile(host_key=wrong_key),
    ):
        with pytest.raises(HostKeyMismatch) as refused:
            SshTransport(profile).connect()
        assert board.host_key_fingerprint in str(refused.value)
    with pytest.raises(HostKeyMismatch) as refused:
        SshTransport(board.profile(host_key="SHA256:" + "A" * 43)).connect()
    assert board.host_key_fingerprint in str(refused.value)
    assert board.wait_for_log(REFUSED_BEFORE_LOGIN, count=3)
    assert board.log_count(LOGIN) == 0


def test_malformed_pins_are_configuration_errors(board: SshEmulator) -> None:
    for bad in ("SHA256:short", "ssh-ed25519", "ssh-ed25519 !!!notbase64", "nonsense"):
        with pytest.raises(SshConfigError):
            board.profile(host_key=bad)


def test_an_unusable_host_key_pin_says_what_to_give(tmp_path: Path) -> None:
    """paramiko's own reason may be cut short or empty; the refusal is one line that names
    the field and what a usable pin looks like."""
    for bad in ("ssh-ed25519 nope", "ssh-foo AAAA"):
        data = {"transport": {"kind": "ssh", "host": "board", "host_key": bad}}
        with pytest.raises(ProfileError) as refused:
            ssh_settings(parse_profile(data, tmp_path / "board.yaml"))
        message = str(refused.value)
        assert message.startswith(f"{tmp_path / 'board.yaml'}: transport.host_key: ")
        assert "\n" not in message
        assert "not a usable public key (" in message and "()" not in message
        assert "/etc/ssh/ssh_host_ed25519_key.pub" in message and "'SHA256:...'" in message


# -- routes --------------------------------------------------------------------


def test_proxy_jump_through_a_second_sshd(tmp_path: Path) -> None:
    """The board listens only inside a namespace that the jump host shares; the host
    reaches the jump host through its ProxyCommand, and the board through the jump."""
    with (
        NetworkNamespace() as netns,
        SshEmulator(tmp_path / "jump", netns=netns, alias="jump") as jump,
        SshEmulator(tmp_path / "board", netns=netns, port=2200) as board,
    ):
        config = tmp_path / "ssh_config"
        config.write_text(
            jump.ssh_config.read_text()
            + f"Host lab-board\n    HostName 127.0.0.1\n    Port {board.port}\n"
            f"    User {board.user}\n    IdentityFile {board.client_key}\n"
            "    ProxyJump jump\n"
        )
        known = tmp_path / "known_hosts"
        known.write_text(jump.known_hosts.read_text() + board.known_hosts.read_text())
        via_config = SshTransport(
            SshSettings(host="lab-board", ssh_config=config, known_hosts=known)
        )
        try:
            assert [hop.hostname + f":{hop.port}" for hop in via_config.route] == [
                "127.0.0.1:22",
                "127.0.0.1:2200",
            ]
            assert via_config.run(["id", "-un"], timeout=10).stdout == b"etdevice\n"
            runs = []
            for _ in range(10):
                started = time.perf_counter()
                via_config.run(["true"], timeout=10)
                runs.append(time.perf_counter() - started)
            print(
                f"\nthrough ProxyJump: run(['true']) median {statistics.median(runs) * 1e3:.1f} ms"
            )
        finally:
            via_config.close()
        assert board.wait_for_log(LOGOUT) and jump.wait_for_log(LOGOUT)
        assert (jump.log_count(LOGIN), board.log_count(LOGIN)) == (1, 1)
        via_profile = SshTransport(
            SshSettings(
                host="127.0.0.1",
                port=board.port,
                user=board.user,
                identity_file=board.client_key,
                ssh_config=config,
                known_hosts=known,
                proxy_jump=f"{jump.user}@jump",
            )
        )
        try:
            assert via_profile.run(["true"], timeout=10).exit_code == 0
        finally:
            via_profile.close()
        direct = SshTransport(
            SshSettings(
                host="127.0.0.1",
                port=board.port,
                ssh_config=config,
                known_hosts=known,
                user=board.user,
                identity_file=board.client_key,
                connect_timeout=5,
            )
        )
        with pytest.raises(DeviceUnavailable):
            direct.connect()  # the board is not on the host's network


def test_ssh_config_alias_and_agent(board: SshEmulator, tmp_path: Path) -> None:
    """A Host alias with no IdentityFile: the key comes from a private ssh-agent."""
    config = tmp_path / "config"
    config.write_text(
        f"Host my-board\n    HostName {board.host}\n    Port {board.port}\n    User {board.user}\n"
        f"    UserKnownHostsFile {board.known_hosts}\n    ProxyCommand {board.proxy_command}\n"
    )
    agent_socket = tmp_path / "agent.sock"
    # Without -D ssh-agent returns once its socket listens, and says its pid.
    started = subprocess.run(
        ["ssh-agent", "-s", "-a", str(agent_socket)],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    agent_pid = int(started.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        added = subprocess.run(
            ["ssh-add", str(board.client_key)],
            env={**os.environ, "SSH_AUTH_SOCK": str(agent_socket)},
            capture_output=True,
            timeout=10,
            check=False,
        )
        assert added.returncode == 0, added.stderr
        os.environ["SSH_AUTH_SOCK"] = str(agent_socket)
        try:
            transport = SshTransport(SshSettings(host="my-board", ssh_config=config))
            assert transport.run(["id", "-un"], timeout=10).stdout == b"etdevice\n"
            transport.close()
        finally:
            del os.environ["SSH_AUTH_SOCK"]
        no_agent = SshTransport(SshSettings(host="my-board", ssh_config=config, use_agent=False))
        with pytest.raises(DeviceUnavailable, match="authentication failed"):
            no_agent.connect()
    finally:
        os.kill(agent_pid, signal.SIGTERM)


def test_refused_port_is_device_unavailable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = SshTransport(
        SshSettings(
            host="127.0.0.1",
            port=port,
            user="nobody",
            known_hosts=tmp_path / "none",
            connect_timeout=5,
        )
    )
    started = time.monotonic()
    with pytest.raises(DeviceUnavailable, match="cannot connect") as refused:
        transport.connect()
    assert time.monotonic() - started < 5
    assert f"127.0.0.1:{port}" in str(refused.value)


def test_a_connection_closed_after_the_banner_says_why_it_failed(tmp_path: Path) -> None:
    """An sshd whose session is killed after its banner: paramiko raises a bare EOFError,
    whose message was empty ('cannot connect: . Is sshd running there...')."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def banner_then_close() -> None:
            client, _ = server.accept()
            with client:
                client.sendall(b"SSH-2.0-OpenSSH_9.2p1\r\n")
                client.recv(4096)  # the client's banner; then the session dies

        thread = threading.Thread(target=banner_then_close, daemon=True)
        thread.start()
        transport = SshTransport(
            SshSettings(
                host="127.0.0.1",
                port=port,
                user="nobody",
                known_hosts=tmp_path / "none",
                connect_timeout=5,
            )
        )
        with pytest.raises(DeviceUnavailable) as lost:
            transport.connect()
        thread.join(5)
    # EOFError, or a reset when the client's key exchange was already sent: a race.
    assert re.fullmatch(
        rf"nobody@127\.0\.0\.1:{port}: cannot connect: the server closed the connection "
        r"during the SSH handshake \((EOFError|ConnectionResetError)\)\. Is sshd running "
        r"there and the address and port right\?",
        str(lost.value),
    )


def test_wrong_key_is_an_authentication_failure(board: SshEmulator, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    transport = SshTransport(board.profile(identity_file=stranger, use_agent=False))
    with pytest.raises(DeviceUnavailable, match="authentication failed") as refused:
        transport.connect()
    assert str(stranger) in str(refused.value)


def test_profile_from_a_device_file(board: SshEmulator, tmp_path: Path) -> None:
    """As open_device gives it after starting an sshd emulator: the config is the
    harness's own, so its ProxyCommand runs; a profile naming that file itself may not."""
    data: dict = {
        "name": "emulated",
        "work_dir": "/tmp/et-harness-ssh",
        "transport": {"kind": "ssh", "host": board.alias, "ssh_config": str(board.ssh_config)},
    }
    with pytest.raises(ProfileError, match=r"transport\.ssh_config: .*ProxyCommand runs a command"):
        ssh_settings(parse_profile(data, tmp_path / "named.yaml"))
    data["emulator"] = "ssh-emu"
    profile = ssh_settings(parse_profile(data, tmp_path / "emulated.yaml"))
    transport = SshTransport(profile)
    try:
        facts = transport.facts()
        assert (facts.abi, facts.os, facts.work_dir) == (
            {"x86_64": "x86_64", "aarch64": "aarch64"}[os.uname().machine],
            "linux",
            "/tmp/et-harness-ssh",
        )
    finally:
        transport.close()
    data["transport"] = {"kind": "ssh", "host": "x", "port": "22"}
    with pytest.raises(ProfileError, match=r"transport\.port"):
        ssh_settings(parse_profile(data, tmp_path / "bad.yaml"))


# -- commands ------------------------------------------------------------------


def test_one_connection_serves_many_commands(own_board: SshEmulator) -> None:
    transport = SshTransport(own_board.profile())
    for _ in range(5):
        assert transport.run(["true"], timeout=10).exit_code == 0
    transport.close()
    assert own_board.wait_for_log(LOGOUT)
    assert own_board.log_count(LOGIN) == 1


def test_exit_codes_outputs_stdin_and_env(ssh: SshTransport) -> None:
    result = ssh.run(["sh", "-c", "echo out; echo err >&2; exit 7"], timeout=10)
    assert (result.exit_code, result.stdout, result.stderr) == (7, b"out\n", b"err\n")
    assert ssh.run(["cat"], timeout=10, stdin=b"\x00\xffdata").stdout == b"\x00\xffdata"
    env = {"PLAIN": "1", "HOSTILE": "$(id) `id` ' \" ;\n", "EMPTY": ""}
    result = ssh.run(["sh", "-c", 'printf "%s|" "$PLAIN" "$HOSTILE" "$EMPTY"'], timeout=10, env=env)
    assert result.stdout == b"1|$(id) `id` ' \" ;\n||"
    assert ssh.run(["no-such-program-et"], timeout=10).exit_code == 127
    assert ssh.run(["sh", "-c", "kill -SEGV $$"], timeout=10).exit_code == 128 + signal.SIGSEGV


def test_hostile_arguments_arrive_exactly(ssh: SshTransport) -> None:
    result = ssh.run(["printf", "%s\\0", *HOSTILE_ARGS], timeout=10)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split(b"\0")[:-1] == [a.encode() for a in HOSTILE_ARGS]
    assert not Path("/tmp/et-pwned").exists()
    dashed = ssh.run(["-n"], timeout=10)  # a program named "-n" must not become an option
    assert dashed.exit_code == 127 and b"-n" in dashed.stderr


_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # annotated: mypy infers a bare tuple as tuple[str]
_ANY_ARG = st.text(st.characters(blacklist_characters="\0", blacklist_categories=_SURROGATES))


def test_any_argv_and_env_round_trip(board: SshEmulator) -> None:
    transport = SshTransport(board.profile())

    @settings(max_examples=150, deadline=None)
    @given(args=st.lists(_ANY_ARG, max_size=6), value=_ANY_ARG)
    def round_trip(args: list[str], value: str) -> None:
        script = 'printf "%s\\0" "$ET_VALUE" "$@"'
        result = transport.run(
            ["sh", "-c", script, "sh", *args], timeout=10, env={"ET_VALUE": value}
        )
        assert result.exit_code == 0, result.stderr
        assert result.stdout.split(b"\0")[:-1] == [w.encode() for w in [value, *args]]

    try:
        round_trip()
    finally:
        transport.close()


def test_timeout_kills_the_command(ssh: SshTransport) -> None:
    marker = f"et-timeout-{os.getpid()}"
    pattern = f"[e]{marker[1:]}"  # matches the sleeper's command line, not pgrep's own
    started = time.monotonic()
    with pytest.raises(TransportTimeout, match=r"did not finish within 0\.5 s"):
        ssh.run(["sh", "-c", f"sleep 30; : {marker}"], timeout=0.5)
    assert time.monotonic() - started < 3
    assert ssh.run(["pgrep", "-f", pattern], timeout=10).exit_code == 1, "still running"


def test_frozen_device_times_out(own_board: SshEmulator) -> None:
    transport = SshTransport(own_board.profile(connect_timeout=2))
    try:
        assert transport.run(["true"], timeout=5).exit_code == 0
        frozen = own_board.pids()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(TransportTimeout):
                transport.run(["true"], timeout=1)
            assert time.monotonic() - started < 4
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
        assert transport.run(["true"], timeout=5).exit_code == 0
    finally:
        transport.close()


def test_reconnects_after_the_connection_dropped(own_board: SshEmulator) -> None:
    transport = SshTransport(own_board.profile())
    try:
        assert transport.run(["true"], timeout=5).exit_code == 0
        _daemon, *sessions = own_board.pids()
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)
        assert transport.run(["echo", "back"], timeout=10).stdout == b"back\n"
    finally:
        transport.close()
    assert own_board.wait_for_log(LOGOUT)
    assert own_board.log_count(LOGIN) == 2


def test_a_send_failing_before_paramiko_notices_the_drop_reconnects(
    own_board: SshEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen under load: the sessions were killed, the request for a channel failed to
    send (EOFError) while paramiko's reader thread had not yet seen the EOF and still
    called the link active. That is a lost link, not a device that does not answer."""
    transport = SshTransport(own_board.profile())
    try:
        assert transport.run(["true"], timeout=5).exit_code == 0
        dead = transport._live().transport
        _daemon, *sessions = own_board.pids()
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)

        def send_fails(*args: object, **kwargs: object) -> None:
            raise EOFError  # what paramiko's packetizer raises writing to a closed socket

        monkeypatch.setattr(dead, "is_active", lambda: True)
        monkeypatch.setattr(dead, "open_session", send_fails)
        assert transport.run(["echo", "back"], timeout=10).stdout == b"back\n"
    finally:
        transport.close()
    assert own_board.log_count(LOGIN) == 2


def test_a_work_dir_another_user_of_the_board_could_change_is_refused(
    board: SshEmulator,
) -> None:
    """As on this machine (test_private_dir.py): the board's work_dir and every directory
    above it must be the login user's or root's and not writable by others."""
    shared = Path(tempfile.mkdtemp(prefix="et-shared-", dir="/tmp"))
    device_uid = pwd.getpwnam(board.user).pw_uid
    transport = SshTransport(
        board.profile(work_dir=str(shared / "et-harness"), work_dir_where="b.yaml: work_dir")
    )
    try:
        shared.chmod(0o777)  # as another user of the board made it: not sticky
        with pytest.raises(
            UnsafeDirectoryError,
            match=rf"^b.yaml: work_dir: {shared} is writable by group "
            r"\(mode 0777\)",
        ):
            transport.facts()
        shared.chmod(0o755)
        os.chown(shared, 65534, 65534)
        with pytest.raises(UnsafeDirectoryError, match=rf"{shared} is owned by uid 65534, not"):
            transport.facts()
        assert not (shared / "et-harness").exists()
        os.chown(shared, device_uid, device_uid)
        assert transport.facts().work_dir == str(shared / "et-harness")
        made = (shared / "et-harness").stat()
        assert (made.st_uid, made.st_mode & 0o777) == (device_uid, 0o700)
    finally:
        transport.close()
        shutil.rmtree(shared)


def test_a_sticky_shared_directory_is_no_work_dir(board: SshEmulator) -> None:
    """A root-owned sticky directory (/var/tmp, or one like /tmp) may lie above the work
    directory, never be it: there another user of the board makes the subdirectory the
    agent is pushed to first, and swaps what the harness puts in it."""
    shared = Path(tempfile.mkdtemp(prefix="et-sticky-", dir="/tmp"))
    planted = shared / "agent"
    transport = SshTransport(board.profile(work_dir=str(shared), work_dir_where="b.yaml: work_dir"))
    try:
        shared.chmod(0o1777)  # root's (the tests run as root), sticky, as /var/tmp is
        planted.mkdir()
        os.chown(planted, 65534, 65534)  # another user of the board was first
        planted.chmod(0o777)
        with pytest.raises(
            UnsafeDirectoryError,
            match=rf"^b.yaml: work_dir: {shared} is "
            r"writable by group \(mode 1777\), and the harness fills it",
        ):
            transport.facts()  # the device's paths (and so every push) come from facts()
    finally:
        transport.close()
        shutil.rmtree(shared)
    below = Path(tempfile.mkdtemp(prefix="et-sticky-", dir="/tmp"))
    try:  # a work dir of its own below the sticky one is fine
        below.chmod(0o1777)
        own = SshTransport(board.profile(work_dir=str(below / "et-harness")))
        try:
            assert own.facts().work_dir == str(below / "et-harness")
        finally:
            own.close()
    finally:
        shutil.rmtree(below)


def test_a_pid_line_of_thousands_of_digits_is_no_crash(ssh: SshTransport) -> None:
    """The first line a command prints is its shell's pid, killed as a group when the
    command times out; a hostile login shell's 5000 digits made int() raise ValueError
    (Python's 4300-digit limit) out of the transport instead of its timeout error."""
    assert ssh._kill_group(b"9" * 5000) is False
    assert ssh._kill_group(b"1" + b"0" * 10) is False  # no pid has 11 digits
    assert ssh._kill_group(b"-1") is False


def test_facts_and_sha256(ssh: SshTransport, tmp_path: Path) -> None:
    facts = ssh.facts()
    assert (facts.os, facts.work_dir) == ("linux", "/tmp/et-harness")
    assert facts.abi == {"x86_64": "x86_64", "aarch64": "aarch64"}[os.uname().machine]
    assert ssh.sha256("/nonexistent/et-file") is None


# -- files ---------------------------------------------------------------------


def test_push_pull_round_trip_of_a_large_file(ssh: SshTransport, tmp_path: Path) -> None:
    payload = os.urandom(8 * 1024 * 1024)
    local = tmp_path / "payload.bin"
    local.write_bytes(payload)
    local.chmod(0o755)
    remote_dir = f"/tmp/et-ssh-test-{os.getpid()}"
    remote = f"{remote_dir}/nested/deeper/payload.bin"
    try:
        started = time.monotonic()
        ssh.push(local, remote)
        pushed = time.monotonic() - started
        assert ssh.sha256(remote) == hashlib.sha256(payload).hexdigest()
        mode = ssh.run(["stat", "-c", "%a", remote], timeout=10).stdout.strip()
        assert mode == b"755", "the executable bit travels with the file"
        started = time.monotonic()
        back = tmp_path / "new" / "dir" / "back.bin"
        ssh.pull(remote, back)
        pulled = time.monotonic() - started
        assert back.read_bytes() == payload
        print(f"\nSFTP 8 MiB: push {pushed * 1000:.0f} ms, pull {pulled * 1000:.0f} ms")
        with pytest.raises(FileNotFoundError):
            ssh.pull(f"{remote_dir}/missing", tmp_path / "missing")
    finally:
        ssh.run(["rm", "-rf", remote_dir], timeout=10)


def test_hostile_file_names(ssh: SshTransport, tmp_path: Path) -> None:
    local = tmp_path / "local"
    local.write_bytes(b"payload")
    remote_dir = f"/tmp/et-ssh-names-{os.getpid()}"
    try:
        for name in ("two words", "line\nbreak", "back\\slash", "-dash", "$(x);`y`", "ü✓"):
            remote = f"{remote_dir}/{name}/{name}"
            ssh.push(local, remote)
            assert ssh.sha256(remote) == hashlib.sha256(b"payload").hexdigest(), name
            ssh.pull(remote, tmp_path / "back")
            assert (tmp_path / "back").read_bytes() == b"payload"
    finally:
        ssh.run(["rm", "-rf", "--", remote_dir], timeout=10)


def test_push_replaces_a_running_program(ssh: SshTransport, tmp_path: Path) -> None:
    program = tmp_path / "sleeper"
    program.write_bytes(Path("/bin/sleep").read_bytes())
    program.chmod(0o755)
    remote = f"/tmp/et-ssh-test-{os.getpid()}-sleeper"
    ssh.push(program, remote)
    running = ssh.open_stream([remote, "30"])
    try:
        ssh.push(program, remote)  # no "text file busy"
        assert ssh.sha256(remote) == hashlib.sha256(program.read_bytes()).hexdigest()
    finally:
        running.close()
        ssh.run(["rm", "-f", remote], timeout=10)


# -- streams -------------------------------------------------------------------


def test_stream_round_trips_many_small_messages(ssh: SshTransport) -> None:
    stream = ssh.open_stream(["cat"])
    try:
        times = []
        for index in range(2000):
            message = index.to_bytes(4, "little") * 16
            started = time.perf_counter()
            stream.write(message)
            assert stream.read_exact(len(message), timeout=5) == message
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        p99 = sorted(times)[int(len(times) * 0.99)]
        print(f"\nstream round trip of 64 B: median {median * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms")
        assert median < 0.05
    finally:
        stream.close()


def test_stream_timeout_keeps_partial_data(ssh: SshTransport) -> None:
    stream = ssh.open_stream(["cat"])
    try:
        stream.write(b"abc")
        with pytest.raises(TransportTimeout, match=r"got 3 of 4 bytes"):
            stream.read_exact(4, timeout=0.3)
        stream.write(b"d")
        assert stream.read_exact(4, timeout=5) == b"abcd"
    finally:
        stream.close()


def test_stream_of_an_exited_process_is_lost(ssh: SshTransport) -> None:
    stream = ssh.open_stream(["sh", "-c", "head -c 3; echo bye >&2; exit 5"])
    try:
        stream.write(b"abc")
        assert stream.read_exact(3, timeout=5) == b"abc"
        with pytest.raises(TransportLost, match="exited with status 5") as lost:
            stream.read_exact(1, timeout=5)
        assert "bye" in str(lost.value) and stream.stderr_tail() == "bye"
        with pytest.raises(TransportLost):
            stream.write(b"more")
    finally:
        stream.close()


def test_stream_close_ends_the_process(ssh: SshTransport) -> None:
    marker = f"et-stream-{os.getpid()}"
    pattern = f"[e]{marker[1:]}"
    stream = ssh.open_stream(["sh", "-c", f"trap '' HUP; sleep 30; : {marker}"])
    stream.close()
    stream.close()
    assert ssh.run(["pgrep", "-f", pattern], timeout=10).exit_code == 1


def test_killing_sshd_mid_stream_is_lost_quickly(own_board: SshEmulator) -> None:
    transport = SshTransport(own_board.profile())
    stream = transport.open_stream(["cat"])
    try:
        stream.write(b"ping")
        assert stream.read_exact(4, timeout=5) == b"ping"
        own_board.kill()
        started = time.monotonic()
        with pytest.raises(TransportLost, match="connection to the device was lost"):
            stream.read_exact(4, timeout=30)
        elapsed = time.monotonic() - started
        print(f"\nsshd killed mid-stream: TransportLost after {elapsed * 1000:.1f} ms")
        assert elapsed < 2
        with pytest.raises(TransportLost):
            stream.write(b"more")
        with pytest.raises(DeviceUnavailable):
            transport.run(["true"], timeout=5)  # reconnect finds nobody listening
    finally:
        stream.close()
        transport.close()


def test_measurements(board: SshEmulator) -> None:
    """Figures for the docs: connect, one command, one stream round trip."""
    transport = SshTransport(board.profile())
    try:
        started = time.perf_counter()
        transport.connect()
        connect = time.perf_counter() - started
        runs = []
        for _ in range(20):
            started = time.perf_counter()
            transport.run(["true"], timeout=10)
            runs.append(time.perf_counter() - started)
        print(
            f"\nconnect {connect * 1e3:.1f} ms; run(['true']) median "
            f"{statistics.median(runs) * 1e3:.1f} ms, max {max(runs) * 1e3:.1f} ms"
        )
        assert connect < 5 and statistics.median(runs) < 1
    finally:
        transport.close()
