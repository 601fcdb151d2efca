"""Emulated devices behind a labgrid exporter: ``et-harness emu NAME --lab-address HOST[:PORT]``.

Each serves on address ``HOST`` of this machine (an exporter host's address, e.g.
``127.0.0.2`` on one machine, or the host's LAN address) at ``PORT``, the operator's
choice; without one, the port chosen at the first start is kept (in the board's folder
under the harness cache) and used again at every later start, as are the SSH board's
host and client keys, so the exporter's config and the published known_hosts stay
right across restarts:

- ssh-emu: its sshd (a ``NetworkService``); the known_hosts line and client key printed;
- mcu-emu (and the other QEMU boards): the board's UART0 on a pty, served by ser2net as
  a ``NetworkSerialPort`` speaking RFC 2217 (``--protocol rfc2217``, labgrid's default)
  or raw TCP (``--protocol raw``);
- adb-emu: its daemon, for the exporter host's adb server to ``adb connect``.

What the exporter config needs is printed. It runs until SIGINT or SIGTERM, and ends
with one line and exit status 1 when what it serves dies (a killed sshd, QEMU or
ser2net), so that a service manager restarts it.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.emulators.lab_devices import EmulatedBoard, LabError
from harness.errors import UsageError
from harness.lifecycle.cache import cache_root
from harness.lifecycle.process import ManagedProcess, free_port
from harness.profiles.device_profile import DeviceProfile
from harness.untrusted.value_rules import ValueRuleError, check_host, split_host_port

SER2NET = "/usr/sbin/ser2net"
SPEED = 115200
_WATCH_S = 0.5  # how often what is served is looked at
_LISTEN_TIMEOUT_S = 10.0


class LabAddressError(ValueError, UsageError):
    """``--lab-address`` is not HOST or HOST:PORT; the message says which part."""


@dataclass(frozen=True)
class Served:
    """A device up on its lab address: the lines for the operator, and what says it died."""

    address: str  # HOST:PORT
    lines: tuple[str, ...]
    ended: Callable[[], str | None]  # why it no longer serves, or None while it does


def parse_lab_address(text: str) -> tuple[str, int | None]:
    """``HOST`` or ``HOST:PORT`` (``[v6]:PORT``), each part checked."""
    try:
        if ":" in text and (text.count(":") == 1 or text.startswith("[")):
            return split_host_port(text)
        return check_host(text), None
    except ValueRuleError as exc:
        raise LabAddressError(f"--lab-address: {exc}") from None


def _port(directory: Path, host: str, given: int | None) -> int:
    """``given``, else the port kept from the first start, else a free one, kept."""
    kept = directory / "lab-port"
    if given is None and kept.is_file():
        text = kept.read_text("ascii", errors="replace").strip()[:6]
        given = int(text) if text.isdigit() and 0 < int(text) < 65536 else None
    port = given or free_port(host)
    directory.mkdir(parents=True, exist_ok=True)
    kept.write_text(f"{port}\n", "ascii")
    return port


@contextlib.contextmanager
def _ssh(profile: DeviceProfile, host: str, port: int, directory: Path) -> Iterator[Served]:
    from harness.emulators.ssh import Isolation, SshEmulator

    with SshEmulator(
        directory / "sshd",
        alias=f"{profile.name}-lab",
        isolation=Isolation.LOOPBACK,
        listen_host=host,
        port=port,
    ) as board:

        def ended() -> str | None:
            if board.pids():
                return None
            last = (board.log_tail().strip().splitlines() or ["(no log)"])[-1]
            return f"its sshd ended (last log line: {last})"

        yield Served(
            f"{host}:{port}",
            (
                "exporter config (a Jinja2 template: no line may start with '#'):",
                f"{_group(profile)}:",
                "  NetworkService:",
                f"    address: {host}",
                f"    port: {port}",
                f"    username: {board.user}",
                "known_hosts line (publish it; a lab profile's transport.known_hosts names "
                "the file):",
                f"{board.known_hosts_name} {board.host_public_key}",
                f"client key (this board's own, kept across restarts): {board.client_key}",
            ),
            ended,
        )


@contextlib.contextmanager
def _serial(
    profile: DeviceProfile, host: str, port: int, directory: Path, protocol: str
) -> Iterator[Served]:
    from harness.emulators.mcu import build_firmware
    from harness.profiles.mcu_boards import DEFAULT_MACHINE

    machine = profile.machine or DEFAULT_MACHINE
    board = EmulatedBoard(build_firmware(machine), directory, "board", machine=machine)
    try:
        accepter = (
            "telnet(rfc2217,mode=server),tcp(nodelay=true)"
            if protocol == "rfc2217"
            else ("tcp(nodelay=true)")
        )
        lines = (
            "connection: &board",
            f"  accepter: {accepter},{host},{port}",
            f"  connector: serialdev,{board.pty},{SPEED}n81,local",
            "  options:",
            "    max-connections: 1",
            "    chardelay: false",
        )
        argv = [SER2NET, "-n", "-d"] + [arg for line in lines for arg in ("-Y", line)]
        ser2net = ManagedProcess(argv, name="ser2net")
        try:
            _wait_listening(host, port, ser2net)

            def ended() -> str | None:
                for what, status in (("QEMU", board.poll()), ("ser2net", ser2net.poll())):
                    if status is not None:
                        return f"its {what} ended (exit status {status})"
                return None

            yield Served(
                f"{host}:{port}",
                (
                    "exporter config (a Jinja2 template: no line may start with '#'):",
                    f"{_group(profile)}:",
                    "  NetworkSerialPort:",
                    f"    host: {host}",
                    f"    port: {port}",
                    f"    speed: {SPEED}",
                    f"    protocol: {protocol}",
                ),
                ended,
            )
        finally:
            ser2net.stop()
    finally:
        board.stop()


def _wait_listening(host: str, port: int, process: ManagedProcess) -> None:
    """Return once ``host:port`` accepts a connection (closed at once)."""
    deadline = time.monotonic() + _LISTEN_TIMEOUT_S
    while True:
        try:
            socket.create_connection((host, port), timeout=1.0).close()
            return
        except OSError as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                raise LabError(
                    f"ser2net did not listen on {host}:{port} ({exc}); it said:\n"
                    f"{process.stderr_tail() or '(nothing)'}"
                ) from None
        time.sleep(0.05)  # ser2net says nothing when it listens


@contextlib.contextmanager
def _adb(profile: DeviceProfile, host: str, port: int, directory: Path) -> Iterator[Served]:
    from harness.emulators.adb.launcher import AdbEmulator

    daemon = AdbEmulator(directory / "adbd", host=host, port=port)
    with daemon as endpoint:
        serial = endpoint.serial
        yield Served(
            f"{host}:{port}",
            (
                f"on the exporter host, attach it to its adb server: adb connect {serial}",
                f"place tags: adb_serial={serial} adb_server=EXPORTER_HOST:5037",
            ),
            lambda: None if daemon.running else "its adb daemon ended",
        )


def _group(profile: DeviceProfile) -> str:
    return profile.name.replace("-", "_")


def serve_for_lab(profile: DeviceProfile, address: str, protocol: str = "rfc2217") -> int:
    """Serve ``profile``'s emulated device on ``address`` until SIGINT or SIGTERM (0), or
    until what it serves dies (1)."""
    host, given = parse_lab_address(address)
    kinds = ("ssh", "serial", "adb")
    if profile.kind not in kinds:
        print(
            f"et-harness emu: --lab-address: {profile.name} is a {profile.kind} device; "
            f"a lab address serves {', '.join(kinds)} devices",
            file=sys.stderr,
        )
        return 2
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    directory = cache_root() / "emulators" / f"lab-{profile.name}-{host}"
    port = _port(directory, host, given)
    serving = (
        _ssh(profile, host, port, directory)
        if profile.kind == "ssh"
        else _serial(profile, host, port, directory, protocol)
        if profile.kind == "serial"
        else _adb(profile, host, port, directory)
    )
    with serving as served:
        print(f"{profile.name} is up on {served.address}")
        for line in served.lines:
            print(line)
        print("Ctrl-C brings it down.", flush=True)
        while signal.sigtimedwait(stop_signals, _WATCH_S) is None:
            why = served.ended()
            if why is not None:
                print(
                    f"et-harness emu: {profile.name} on {served.address} no longer serves: "
                    f"{why}; start it again (the same address and port)",
                    file=sys.stderr,
                    flush=True,
                )
                return 1
    print(f"{profile.name} is down")
    return 0
