"""adb-emu against the real, unmodified adb client (Debian's adb 1.0.41).

Every test talks to a private adb server (own port, HOME and TMPDIR) that is killed at
the end, so runs never touch the machine's default server on 5037.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prerequisites import require

from harness.emulators.adb.auth import AdbKeyError, AdbPublicKey, load_adb_keys
from harness.emulators.adb.daemon import PortInScanRange, check_port
from harness.emulators.adb.launcher import AdbEmulator, AdbEmulatorError, AdbEndpoint
from harness.emulators.adb.properties import DeviceProperties
from harness.emulators.adb.protocol import Command, Message, ProtocolError, read_message
from harness.emulators.adb.server import PrivateAdbServer
from harness.lifecycle.reap import start_time


@pytest.fixture(autouse=True)
def _prerequisites() -> None:
    require("adb", root=True)


PROPERTIES = DeviceProperties(model="EtbEmu_64", device="etb_emu_arm64", name="etb_emu")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateAdbServer]:
    with PrivateAdbServer(tmp_path_factory.mktemp("adb-home")) as adb_server:
        yield adb_server


@pytest.fixture(scope="module")
def device_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("device") / "root"


@pytest.fixture(scope="module")
def device(server: PrivateAdbServer, device_root: Path) -> Iterator[AdbEndpoint]:
    with AdbEmulator(device_root, properties=PROPERTIES) as endpoint:
        connect(server, endpoint)
        yield endpoint
        server.adb("disconnect", endpoint.serial)


def connect(server: PrivateAdbServer, endpoint: AdbEndpoint) -> None:
    result = server.adb("connect", endpoint.serial)
    assert f"connected to {endpoint.serial}" in result.stdout, result.stdout + result.stderr


def state_of(server: PrivateAdbServer, serial: str) -> str | None:
    for line in server.adb("devices").stdout.splitlines():
        name, _, state = line.partition("\t")
        if name == serial:
            return state
    return None


def wait_for_state(
    server: PrivateAdbServer,
    serial: str,
    wanted: str | tuple[str | None, ...],
    within: float = 10.0,
) -> str | None:
    """Poll `adb devices` until ``serial`` is in a ``wanted`` state (None: not listed)."""
    accepted = (wanted,) if isinstance(wanted, str) else wanted
    deadline = time.monotonic() + within
    state = state_of(server, serial)
    while state not in accepted and time.monotonic() < deadline:
        time.sleep(0.05)
        state = state_of(server, serial)
    return state


def shell(
    server: PrivateAdbServer,
    endpoint: AdbEndpoint,
    *args: str,
    stdin: bytes | None = None,
    timeout: float = 30.0,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [server.adb_path, "-P", str(server.port), "-s", endpoint.serial, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        env=server.env,
    )


def host_processes_with(marker: str) -> list[int]:
    """PIDs of host processes whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and b"pytest" not in cmdline:
                found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while (left := host_processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


# -- identity ----------------------------------------------------------------------


def test_adb_devices_lists_the_emulator_with_its_model(
    server: PrivateAdbServer, device: AdbEndpoint
) -> None:
    lines = server.adb("devices", "-l").stdout.splitlines()
    mine = [line for line in lines if line.startswith(device.serial)]
    assert len(mine) == 1, lines
    fields = mine[0].split()
    assert fields[1] == "device"
    assert "model:EtbEmu_64" in fields
    assert "device:etb_emu_arm64" in fields
    assert "product:etb_emu" in fields


def test_features_include_shell_v2_and_cmd(server: PrivateAdbServer, device: AdbEndpoint) -> None:
    features = shell(server, device, "features").stdout.decode().split()
    assert {"shell_v2", "cmd"} <= set(features)


def test_getprop_reports_the_android_abi(server: PrivateAdbServer, device: AdbEndpoint) -> None:
    abi = shell(server, device, "shell", "getprop", "ro.product.cpu.abi")
    assert abi.stdout == b"arm64-v8a\n"
    assert shell(server, device, "shell", "getprop ro.product.model").stdout == b"EtbEmu_64\n"
    missing = shell(server, device, "shell", "getprop no.such.prop fallback")
    assert missing.stdout == b"fallback\n"
    listing = shell(server, device, "shell", "getprop").stdout.decode()
    assert "[ro.product.cpu.abilist]: [arm64-v8a]" in listing


# -- shell ---------------------------------------------------------------------------


def test_shell_v2_separates_stdout_stderr_and_returns_the_exit_code(
    server: PrivateAdbServer, device: AdbEndpoint
) -> None:
    result = shell(server, device, "shell", "echo out; echo err >&2; exit 42")
    assert (result.returncode, result.stdout, result.stderr) == (42, b"out\n", b"err\n")
    assert shell(server, device, "shell", "echo hello").stdout == b"hello\n"
    assert shell(server, device, "shell", "kill -TERM $$").returncode == 128 + 15


def test_shell_v2_streams_stdin_and_closes_it(
    server: PrivateAdbServer, device: AdbEndpoint
) -> None:
    data = os.urandom(3 * 1024 * 1024)
    result = shell(server, device, "shell", "sha256sum; echo stdin-closed >&2", stdin=data)
    assert result.returncode == 0
    assert result.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    assert result.stderr == b"stdin-closed\n"


def test_large_output_arrives_complete(server: PrivateAdbServer, device: AdbEndpoint) -> None:
    result = shell(server, device, "shell", "head -c 20000000 /dev/zero")
    assert len(result.stdout) == 20_000_000
    assert result.stdout.count(0) == 20_000_000


def test_plain_shell_v1_and_exec_out(server: PrivateAdbServer, device: AdbEndpoint) -> None:
    v1 = shell(server, device, "shell", "-x", "echo out; echo err >&2; exit 3")
    # Shell v1 has no exit status and mixes stderr into stdout, as on old Android.
    assert v1.returncode == 0
    assert sorted(v1.stdout.splitlines()) == [b"err", b"out"]
    assert shell(server, device, "exec-out", "printf 'a\\0b'").stdout == b"a\0b"


def test_pty_shell_and_piped_interactive_shell(
    server: PrivateAdbServer, device: AdbEndpoint
) -> None:
    forced = shell(server, device, "shell", "-tt", "tty; echo $TERM; exit 5")
    assert forced.returncode == 5
    tty, term = forced.stdout.split(b"\r\n")[:2]  # the pty turns \n into \r\n
    assert tty.startswith(b"/dev/pts/") and term == b"xterm"
    piped = shell(server, device, "shell", stdin=b"echo hi\nexit 4\n")
    assert (piped.returncode, piped.stdout) == (4, b"hi\n")


def test_closing_the_stream_kills_what_the_shell_started(
    server: PrivateAdbServer, device: AdbEndpoint
) -> None:
    marker = str(30000 + secrets.randbelow(9999))  # sleep N / sleep N4: unique to this run
    client = subprocess.Popen(
        [server.adb_path, "-P", str(server.port), "-s", device.serial, "shell",
         f"setsid sleep {marker} & sleep {marker}4 & echo started; wait"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=server.env,
    )  # fmt: skip
    assert client.stdout is not None
    assert client.stdout.readline() == b"started\n"
    assert host_processes_with(f"sleep {marker}")
    client.kill()
    client.wait()
    client.stdout.close()
    assert wait_until_gone(f"sleep {marker}") == []


# -- files -----------------------------------------------------------------------------


def test_push_and_pull_round_trip_a_multi_megabyte_file(
    server: PrivateAdbServer, device: AdbEndpoint, device_root: Path, tmp_path: Path
) -> None:
    original = tmp_path / "payload.bin"
    original.write_bytes(os.urandom(6 * 1024 * 1024 + 123))
    remote = "/data/local/tmp/deep/new dir/payload.bin"
    push = shell(server, device, "push", str(original), remote)
    assert push.returncode == 0, push.stderr
    assert (
        device_root / "data/local/tmp/deep/new dir/payload.bin"
    ).read_bytes() == original.read_bytes()
    device_sum = shell(
        server, device, "shell", "sha256sum < '/data/local/tmp/deep/new dir/payload.bin'"
    )
    assert (
        device_sum.stdout.split()[0].decode() == hashlib.sha256(original.read_bytes()).hexdigest()
    )
    back = tmp_path / "back.bin"
    pull = shell(server, device, "pull", remote, str(back))
    assert pull.returncode == 0, pull.stderr
    assert back.read_bytes() == original.read_bytes()


def test_pull_of_a_missing_file_fails_cleanly(
    server: PrivateAdbServer, device: AdbEndpoint, tmp_path: Path
) -> None:
    result = shell(server, device, "pull", "/data/local/tmp/no-such-file", str(tmp_path / "x"))
    assert result.returncode == 1
    assert b"does not exist" in result.stdout  # adb 1.0.41 reports sync errors on stdout


def test_push_under_a_file_fails_with_the_reason(
    server: PrivateAdbServer, device: AdbEndpoint, tmp_path: Path
) -> None:
    local = tmp_path / "f"
    local.write_bytes(b"x")
    assert shell(server, device, "push", str(local), "/data/local/tmp/plainfile").returncode == 0
    result = shell(server, device, "push", str(local), "/data/local/tmp/plainfile/child")
    assert result.returncode == 1
    assert b"remote couldn't create file" in result.stdout


def test_adb_ls_lists_a_device_directory(
    server: PrivateAdbServer, device: AdbEndpoint, tmp_path: Path
) -> None:
    local = tmp_path / "listed"
    local.write_bytes(b"12345")
    assert shell(server, device, "push", str(local), "/data/local/tmp/lsdir/listed").returncode == 0
    listing = shell(server, device, "ls", "/data/local/tmp/lsdir").stdout.decode().split()
    # mode, size, mtime (hex), name
    assert listing[1:] == [f"{5:08x}", listing[2], "listed"]


# -- the device root -----------------------------------------------------------------


def test_the_device_has_its_own_root(
    server: PrivateAdbServer, device: AdbEndpoint, device_root: Path
) -> None:
    result = shell(
        server, device, "shell",
        "echo isolated > /data/local/tmp/where.txt && ls -d /work;"
        " touch /usr/adb-emu-probe; ls /data",
    )  # fmt: skip
    assert (device_root / "data/local/tmp/where.txt").read_text() == "isolated\n"
    assert not Path("/data/local/tmp/where.txt").exists()
    assert b"'/work': No such file" in result.stderr  # host directories are not visible
    assert b"Read-only file system" in result.stderr  # host /usr is mounted read-only
    assert not Path("/usr/adb-emu-probe").exists()
    assert result.stdout == b"local\n"


def test_sync_resolves_symlinks_inside_the_device_root(
    server: PrivateAdbServer, device: AdbEndpoint, device_root: Path, tmp_path: Path
) -> None:
    assert shell(server, device, "shell", "ln -sfn / /data/local/tmp/to-root").returncode == 0
    local = tmp_path / "through-link"
    local.write_bytes(b"stays inside")
    result = shell(server, device, "push", str(local), "/data/local/tmp/to-root/tmp/through-link")
    assert result.returncode == 0, result.stderr
    assert (device_root / "tmp/through-link").read_bytes() == b"stays inside"
    assert not Path("/tmp/through-link").exists()


# -- a long-lived stream ---------------------------------------------------------------


def test_long_lived_cat_round_trips_many_small_messages(
    server: PrivateAdbServer, device: AdbEndpoint
) -> None:
    client = subprocess.Popen(
        [server.adb_path, "-P", str(server.port), "-s", device.serial, "shell", "cat"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=server.env, bufsize=0,
    )  # fmt: skip
    assert client.stdin is not None and client.stdout is not None
    count = 1000
    started = time.perf_counter()
    for number in range(count):
        message = b"message %06d\n" % number
        client.stdin.write(message)
        received = b""
        while len(received) < len(message):
            chunk = client.stdout.read(len(message) - len(received))
            assert chunk, "cat ended early"
            received += chunk
        assert received == message
    per_message_ms = (time.perf_counter() - started) / count * 1000
    client.stdin.close()
    assert client.wait(10) == 0
    client.stdout.close()
    print(f"adb shell cat round trip: {per_message_ms:.3f} ms per message ({count} messages)")
    assert per_message_ms < 20, "per-message latency suggests Nagle or a stall"


# -- lifecycle, auth, ports ----------------------------------------------------------


def test_a_killed_daemon_shows_offline_and_comes_back_after_reconnect(
    server: PrivateAdbServer, tmp_path: Path
) -> None:
    emulator = AdbEmulator(tmp_path / "root")
    emulator.start()
    endpoint = emulator.endpoint
    try:
        connect(server, endpoint)
        assert wait_for_state(server, endpoint.serial, "device") == "device"
        emulator.kill()
        # offline at first; the server may drop the device after failed reconnects
        assert wait_for_state(server, endpoint.serial, ("offline", None)) in ("offline", None)
        emulator.start()
        assert emulator.endpoint == endpoint  # same port
        # Still offline until disconnect + connect, or the adb server's own reconnect
        # timer (about 10 s in adb 1.0.41) fires.
        server.adb("disconnect", endpoint.serial)
        connect(server, endpoint)
        assert wait_for_state(server, endpoint.serial, "device") == "device"
    finally:
        server.adb("disconnect", endpoint.serial)
        emulator.stop()


def test_auth_accepts_the_hosts_key_and_rejects_others(
    server: PrivateAdbServer, tmp_path: Path
) -> None:
    known = load_adb_keys(server.public_key)
    assert len(known) == 1 and known[0].exponent == 65537
    with PrivateAdbServer(tmp_path / "stranger-home") as stranger:
        stranger_key = stranger.public_key.read_text()
    assert AdbPublicKey.parse(stranger_key) != known[0]

    accepted_keys = tmp_path / "adb_keys"
    accepted_keys.write_text(server.public_key.read_text())
    with AdbEmulator(tmp_path / "trusting", adb_keys=accepted_keys) as endpoint:
        connect(server, endpoint)
        assert wait_for_state(server, endpoint.serial, "device") == "device"
        assert shell(server, endpoint, "shell", "echo authorized").stdout == b"authorized\n"
        server.adb("disconnect", endpoint.serial)

    other_keys = tmp_path / "other_keys"
    other_keys.write_text(stranger_key)
    with AdbEmulator(tmp_path / "strict", adb_keys=other_keys) as endpoint:
        server.adb("connect", endpoint.serial)
        assert wait_for_state(server, endpoint.serial, "unauthorized") == "unauthorized"
        refused = shell(server, endpoint, "shell", "echo no")
        assert refused.returncode != 0 and b"unauthorized" in refused.stderr
        server.adb("disconnect", endpoint.serial)


def test_ports_the_adb_server_scans_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PortInScanRange, match="5555-5585"):
        check_port(5560)
    check_port(5554)
    check_port(5586)
    with pytest.raises(AdbEmulatorError, match="5555-5585"):
        AdbEmulator(tmp_path / "root", port=5571).start()


# -- protocol pieces -------------------------------------------------------------------


def test_messages_round_trip_and_bad_headers_are_rejected() -> None:
    async def decode(data: bytes) -> Message:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await read_message(reader, max_payload=64)

    message = Message(Command.WRTE, 7, 9, b"payload")
    assert asyncio.run(decode(message.encode(with_checksum=True))) == message
    header = bytearray(message.encode(with_checksum=False))
    header[20] ^= 0xFF  # magic no longer command ^ 0xFFFFFFFF
    with pytest.raises(ProtocolError, match="bad magic"):
        asyncio.run(decode(bytes(header)))
    with pytest.raises(ProtocolError, match="exceeds 64"):
        asyncio.run(decode(Message(Command.WRTE, 1, 1, b"x" * 65).encode(with_checksum=False)))


def test_adb_key_lines_are_checked() -> None:
    with pytest.raises(AdbKeyError, match="not base64"):
        AdbPublicKey.parse("@@@ user@host")
    with pytest.raises(AdbKeyError, match="too short"):
        AdbPublicKey.parse("AAAA user@host")


def test_banner_properties_are_checked() -> None:
    with pytest.raises(ValueError, match="would break the adb banner"):
        DeviceProperties(model="a;b")
    banner = DeviceProperties().banner().decode()
    assert banner.startswith("device::") and "features=shell_v2,cmd" in banner


def test_the_private_server_is_a_foreground_child_that_stops_with_it(tmp_path: Path) -> None:
    with PrivateAdbServer(tmp_path / "home") as private:
        pid = private.pid
        assert pid is not None
        stat = Path(f"/proc/{pid}/stat").read_text()
        assert int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid(), "not forked away"
        assert private.adb("devices").returncode == 0
        assert host_processes_with(f"-P\0{private.port}\0server\0nodaemon") == [pid]
    assert start_time(pid) is None
    assert not host_processes_with(f"-P\0{private.port}\0"), "a server was left (or forked)"
