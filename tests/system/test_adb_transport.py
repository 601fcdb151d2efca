"""AdbTransport with the real adb client against adb-emu, through private adb servers."""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prerequisites import require

from harness.devices.adb import adb_settings
from harness.emulators.adb.launcher import AdbEmulator, AdbEndpoint
from harness.emulators.adb.server import PrivateAdbServer, free_port
from harness.profiles.device_profile import ProfileError, parse_profile
from harness.transport.adb import AdbSettings, AdbTransport
from harness.transport.base import DeviceUnavailable, TransportLost, TransportTimeout


@pytest.fixture(autouse=True)
def _prerequisites() -> None:
    require("adb", root=True)


WORK = "/data/local/tmp/et-harness"
HOSTILE_NAMES = [
    "with space",
    'it\'s "quoted"',
    "$(touch /tmp/adb-pwned)",
    "semi;colon && echo x",
    "new\nline",
    "ünïcødé-名前",
    "-leading-dash",
    "back\\slash*?[glob]",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateAdbServer]:
    with PrivateAdbServer(tmp_path_factory.mktemp("adb-home")) as adb_server:
        yield adb_server


@pytest.fixture(scope="module")
def device_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("device") / "root"


@pytest.fixture(scope="module")
def device(device_root: Path) -> Iterator[AdbEndpoint]:
    with AdbEmulator(device_root) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def transport(server: PrivateAdbServer, device: AdbEndpoint) -> AdbTransport:
    settings = AdbSettings(server_port=server.port, connect=device.serial, query_timeout=10)
    return AdbTransport(settings)


@pytest.fixture
def no_android_serial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANDROID_SERIAL", raising=False)


def wait_for_file(path: Path, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return path.exists()


def wait_until_gone(marker: str, within: float = 10.0) -> list[int]:
    """Poll /proc until no host process has ``marker`` in its command line."""
    deadline = time.monotonic() + within
    while (left := _processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if marker.encode() in cmdline and b"pytest" not in cmdline:
            found.append(int(entry.name))
    return found


# -- command lines -------------------------------------------------------------------


def test_target_from_profile(tmp_path: Path) -> None:
    profile = parse_profile(
        {
            "transport": {"kind": "adb", "connect": "127.0.0.1:40555", "server_port": 15037},
            "work_dir": WORK,
            "timeouts": {"connect": 7, "command": 60},
        },
        tmp_path / "emu.yaml",
    )
    target = adb_settings(profile)
    assert target == AdbSettings(
        connect="127.0.0.1:40555",
        server_port=15037,
        work_dir=WORK,
        query_timeout=7,
        transfer_timeout=60,
    )
    bad = parse_profile({"transport": {"kind": "adb", "serail": "x"}}, tmp_path / "bad.yaml")
    with pytest.raises(
        ProfileError,
        match=r"bad.yaml: transport.serail: unknown field; "
        r"allowed: connect, serial, server_host, server_port$",
    ):
        adb_settings(bad)


# -- running commands ---------------------------------------------------------------


def test_facts_come_from_getprop(transport: AdbTransport) -> None:
    facts = transport.facts()
    assert (facts.abi, facts.os, facts.work_dir) == ("arm64-v8a", "android", WORK)


def test_run_returns_exit_code_stdout_stderr_and_takes_stdin(transport: AdbTransport) -> None:
    result = transport.run(
        ["sh", "-c", 'cat; echo "$GREETING" >&2; exit 5'],
        timeout=10,
        env={"GREETING": "hi there; $(no)"},
        stdin=b"from stdin\n",
    )
    assert (result.exit_code, result.stdout, result.stderr) == (
        5,
        b"from stdin\n",
        b"hi there; $(no)\n",
    )
    assert transport.run(["true"], timeout=10).exit_code == 0


def test_run_passes_hostile_arguments_as_data(transport: AdbTransport) -> None:
    result = transport.run(["printf", "%s\\0", *HOSTILE_NAMES], timeout=10)
    assert result.exit_code == 0
    assert result.stdout.split(b"\0")[:-1] == [name.encode() for name in HOSTILE_NAMES]
    assert not Path("/tmp/adb-pwned").exists()
    assert transport.run(["test", "-e", "/tmp/adb-pwned"], timeout=10).exit_code == 1


def test_run_timeout_raises_and_stops_the_device_process(
    transport: AdbTransport, device_root: Path
) -> None:
    started = time.monotonic()
    done = f"/data/local/tmp/t-done-{secrets.token_hex(4)}"  # unique: runs may overlap
    script = f"touch /data/local/tmp/t-started; sleep 30; touch {done}"
    with pytest.raises(TransportTimeout, match=r"did not finish within 0\.5 s"):
        transport.run(["sh", "-c", script], timeout=0.5)
    assert time.monotonic() - started < 5
    assert (device_root / "data/local/tmp/t-started").exists()
    # The killed client closed the stream; adb-emu killed the shell with it.
    assert wait_until_gone(f"touch {done}") == []
    assert not (device_root / done.lstrip("/")).exists()


# -- files ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_round_trip_through_push_and_pull(
    transport: AdbTransport, device_root: Path, tmp_path: Path, name: str
) -> None:
    local = tmp_path / "source"
    local.write_bytes(name.encode() * 1000)
    remote = f"{WORK}/{name}/{name}.bin"
    transport.push(local, remote)
    assert (device_root / remote.lstrip("/")).read_bytes() == local.read_bytes()
    assert transport.sha256(remote) == hashlib.sha256(local.read_bytes()).hexdigest()
    back = tmp_path / name.replace("/", "_")
    transport.pull(remote, back)
    assert back.read_bytes() == local.read_bytes()
    assert not Path("/tmp/adb-pwned").exists()


def test_push_pull_multi_megabyte(transport: AdbTransport, tmp_path: Path) -> None:
    payload = os.urandom(5 * 1024 * 1024)
    (tmp_path / "big").write_bytes(payload)
    started = time.perf_counter()
    transport.push(tmp_path / "big", f"{WORK}/big.bin")
    pushed = time.perf_counter()
    transport.pull(f"{WORK}/big.bin", tmp_path / "back")
    pulled = time.perf_counter()
    assert (tmp_path / "back").read_bytes() == payload
    print(f"5 MiB push {pushed - started:.3f} s, pull {pulled - pushed:.3f} s")


def test_missing_remote_files(transport: AdbTransport, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        transport.pull(f"{WORK}/absent", tmp_path / "x")
    assert not (tmp_path / "x").exists()
    assert transport.sha256(f"{WORK}/absent") is None
    with pytest.raises(ValueError, match="must be absolute"):
        transport.pull("relative/path", tmp_path / "x")


# -- streams --------------------------------------------------------------------------


def test_stream_round_trips_many_small_messages(transport: AdbTransport) -> None:
    stream = transport.open_stream(["cat"])
    try:
        count = 1000
        started = time.perf_counter()
        for number in range(count):
            message = b"%06d:" % number + b"x" * 50
            stream.write(message)
            assert stream.read_exact(len(message), timeout=5) == message
        per_message_ms = (time.perf_counter() - started) / count * 1000
    finally:
        stream.close()
    print(f"AdbTransport stream round trip: {per_message_ms:.3f} ms per message ({count} messages)")
    assert per_message_ms < 20


def test_stream_env_stderr_and_read_timeout(transport: AdbTransport) -> None:
    stream = transport.open_stream(
        ["sh", "-c", 'echo "$WHO" >&2; printf ready; exec cat'], env={"WHO": "me too"}
    )
    try:
        assert stream.read_exact(5, timeout=5) == b"ready"
        started = time.monotonic()
        with pytest.raises(TransportTimeout, match=r"no answer within 0\.2 s \(got 0 of 1 bytes\)"):
            stream.read_exact(1, timeout=0.2)
        assert time.monotonic() - started < 2
        assert stream.stderr_tail() == "me too"
    finally:
        stream.close()
        stream.close()


def test_stream_ending_early_is_transport_lost(transport: AdbTransport) -> None:
    stream = transport.open_stream(["sh", "-c", "printf abc; echo bye >&2"])
    try:
        with pytest.raises(
            TransportLost, match=r"(?s)closed its output.*device state: device.*bye"
        ):
            stream.read_exact(10, timeout=5)
    finally:
        stream.close()


# -- device trouble ------------------------------------------------------------------


def test_daemon_killed_mid_stream_is_transport_lost_quickly(
    server: PrivateAdbServer, tmp_path: Path
) -> None:
    emulator = AdbEmulator(tmp_path / "root")
    emulator.start()
    endpoint = emulator.endpoint
    try:
        transport = AdbTransport(AdbSettings(server_port=server.port, connect=endpoint.serial))
        stream = transport.open_stream(["cat"])
        stream.write(b"ping")
        assert stream.read_exact(4, timeout=5) == b"ping"
        emulator.kill()
        started = time.monotonic()
        with pytest.raises(TransportLost, match=r"writing failed|closed its output"):
            stream.write(b"pong")
            stream.read_exact(4, timeout=30)
        detected = time.monotonic() - started
        stream.close()
        print(f"daemon killed mid-stream: TransportLost after {detected * 1000:.1f} ms")
        assert detected < 5
    finally:
        emulator.stop()
        server.adb("disconnect", endpoint.serial)


def test_daemon_killed_mid_run_is_transport_lost_not_exit_0(
    server: PrivateAdbServer, tmp_path: Path
) -> None:
    emulator = AdbEmulator(tmp_path / "root")
    emulator.start()
    endpoint = emulator.endpoint
    outcome: list[BaseException | object] = []
    try:
        transport = AdbTransport(AdbSettings(server_port=server.port, connect=endpoint.serial))
        transport.facts()

        def run() -> None:
            try:
                outcome.append(transport.run(
                    ["sh", "-c", "touch /data/local/tmp/started; sleep 30"], timeout=60
                ))  # fmt: skip
            except Exception as exc:  # handed to the test thread
                outcome.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert wait_for_file(tmp_path / "root/data/local/tmp/started")
        emulator.kill()
        worker.join(10)
        assert not worker.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], TransportLost), outcome
        assert "cut off" in str(outcome[0])
    finally:
        emulator.stop()
        server.adb("disconnect", endpoint.serial)


def test_restarted_daemon_is_reconnected_by_a_connect_profile(
    server: PrivateAdbServer, tmp_path: Path
) -> None:
    emulator = AdbEmulator(tmp_path / "root")
    emulator.start()
    endpoint = emulator.endpoint
    try:
        transport = AdbTransport(AdbSettings(server_port=server.port, connect=endpoint.serial))
        assert transport.run(["echo", "one"], timeout=10).stdout == b"one\n"
        emulator.kill()
        # adb 1.0.41 lists a dead TCP device as offline, then drops it after failed
        # reconnects; either way a transport without `connect` cannot use it.
        with pytest.raises(DeviceUnavailable, match=f"{endpoint.serial} is (offline|not attached)"):
            _ = AdbTransport(
                AdbSettings(server_port=server.port, serial=endpoint.serial, query_timeout=1)
            ).serial
        # The transport notices the lost device once ...
        with pytest.raises((DeviceUnavailable, TransportLost)):
            transport.run(["echo", "two"], timeout=10)
        emulator.start()
        # ... and reconnects (disconnect + connect) on next use, without the adb
        # server's own reconnect timer (about 10 s in adb 1.0.41).
        started = time.monotonic()
        assert transport.run(["echo", "three"], timeout=10).stdout == b"three\n"
        assert time.monotonic() - started < 5
    finally:
        emulator.stop()
        server.adb("disconnect", endpoint.serial)


def test_no_device_attached(tmp_path: Path, no_android_serial: None) -> None:
    with PrivateAdbServer(tmp_path / "home") as empty:
        transport = AdbTransport(AdbSettings(server_port=empty.port))
        with pytest.raises(DeviceUnavailable, match="no Android device is attached"):
            transport.facts()


def test_several_devices_need_a_serial(
    server: PrivateAdbServer,
    device: AdbEndpoint,
    tmp_path: Path,
    no_android_serial: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with AdbEmulator(tmp_path / "second") as second:
        server.adb("connect", device.serial)
        server.adb("connect", second.serial)
        try:
            with pytest.raises(DeviceUnavailable) as caught:
                AdbTransport(AdbSettings(server_port=server.port)).facts()
            message = str(caught.value)
            assert device.serial in message and second.serial in message
            assert "transport.serial" in message and "ANDROID_SERIAL" in message

            chosen = AdbTransport(AdbSettings(server_port=server.port, serial=second.serial))
            assert chosen.run(["getprop", "ro.product.model"], timeout=10).stdout == b"adb-emu\n"
            monkeypatch.setenv("ANDROID_SERIAL", second.serial)
            assert AdbTransport(AdbSettings(server_port=server.port)).serial == second.serial
        finally:
            server.adb("disconnect", second.serial)


def test_unknown_serial_names_the_attached_devices(
    server: PrivateAdbServer, device: AdbEndpoint, transport: AdbTransport
) -> None:
    transport.facts()  # makes sure `device` is connected
    with pytest.raises(DeviceUnavailable, match=rf"not attached .*{device.serial} \(device\)"):
        AdbTransport(AdbSettings(server_port=server.port, serial="no-such-serial")).facts()


def test_unauthorized_device(server: PrivateAdbServer, tmp_path: Path) -> None:
    with PrivateAdbServer(tmp_path / "stranger-home") as stranger:
        stranger_key = stranger.public_key.read_text()
    (tmp_path / "adb_keys").write_text(stranger_key)
    with AdbEmulator(tmp_path / "root", adb_keys=tmp_path / "adb_keys") as endpoint:
        try:
            transport = AdbTransport(
                AdbSettings(server_port=server.port, connect=endpoint.serial, query_timeout=5)
            )
            with pytest.raises(
                DeviceUnavailable, match="unauthorized: accept the 'Allow USB debugging'"
            ):
                transport.facts()
        finally:
            server.adb("disconnect", endpoint.serial)


def test_unreachable_adb_server(no_android_serial: None) -> None:
    transport = AdbTransport(AdbSettings(server_host="127.0.0.1", server_port=free_port()))
    with pytest.raises(DeviceUnavailable, match="does not answer"):
        transport.facts()


def test_no_server_is_started_behind_the_runs_back(no_android_serial: None) -> None:
    """Without a running server the adb client starts one in the background for
    localhost, which would outlive the run: the transport refuses instead, naming the fix."""
    from harness.transport.adb import adb_server_answers

    port = free_port()
    transport = AdbTransport(AdbSettings(server_port=port, query_timeout=5))
    says = rf"127\.0\.0\.1:{port} does not answer.*adb start-server"
    with pytest.raises(DeviceUnavailable, match=says):
        transport.facts()
    assert not adb_server_answers("localhost", port, 1.0)  # the client started no server


def test_an_ipv6_adb_server_is_reached(no_android_serial: None) -> None:
    """``server_host: '::1'`` (a lab's ``adb_server=[::1]:5037``) reaches the server at ::1:
    adb's -H reads a bare IPv6 address as host and port ('::1:PORT:5555'), so the
    transport brackets it."""
    import socket

    listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    listener.bind(("::1", 0))
    listener.listen(1)
    listener.settimeout(15)
    port = listener.getsockname()[1]
    heard: list[bytes] = []

    def answer() -> None:
        try:
            peer, _ = listener.accept()
        except OSError:
            return
        with peer:
            peer.settimeout(5)
            heard.append(peer.recv(64))  # the client's first request, then a closed socket

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    transport = AdbTransport(AdbSettings(server_host="::1", server_port=port, query_timeout=10))
    with pytest.raises(DeviceUnavailable, match=rf"adb server at \[::1\]:{port} does not answer"):
        transport.devices()
    listener.close()
    thread.join(5)
    assert heard and heard[0][4:].startswith(b"host:"), heard
