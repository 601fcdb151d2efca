"""The devices on an emulated lab's exporter hosts, and the power switch they hang off.

- :class:`EmulatedBoard`: QEMU mps2-an385 running the agent firmware, its UART0 on a
  pseudo-terminal (``/dev/pts/N``, what ser2net serves as a real board's ``/dev/ttyACM0``);
- :class:`EmulatedPhone`: adb-emu (:mod:`harness.emulators.adb.launcher`) on the
  exporter's address, attached to that host's real adb server (``adb connect``), which
  only accepts the phone if it knows the server's key, as a phone with USB debugging
  authorised for that host does;
- :class:`PoweredLinuxBoard`: a linux-emu board (:mod:`harness.emulators.linux`: Debian's
  arm64 kernel booting under QEMU) serving SSH on the exporter's address;
- :class:`PowerSwitch`: the stand-in power switch, a small HTTP server on the exporter's
  address answering labgrid's ``simplerest`` model (``GET /relay/INDEX/VALUE``). For a
  board, off pauses its CPU (QEMU monitor ``stop``), on resets and resumes it
  (``system_reset``, ``cont``): the firmware boots again with an empty registry, as
  after a power cycle. For a phone, off ends adb-emu abruptly (its files are kept), on
  starts it again on the same port and attaches it to the adb server again. For a
  Linux board, off cuts its power at once (its QEMU killed, the flash keeps what reached
  it), on boots it in the background, as a relay closing does: whoever switched it on
  waits for its SSH.

:mod:`harness.emulators.labgrid_lab` puts them behind a real coordinator and exporters.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import select
import signal
import socket
import socketserver
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.emulators.adb.launcher import AdbEmulator
from harness.emulators.adb.server import PrivateAdbServer
from harness.emulators.mcu import QEMU
from harness.errors import InfrastructureError
from harness.lifecycle.process import ManagedProcess
from harness.lifecycle.reap import descendants
from harness.profiles.mcu_boards import DEFAULT_MACHINE

if TYPE_CHECKING:
    from harness.emulators.linux import LinuxEmulator

_PTY = re.compile(r"char device redirected to (/dev/pts/[0-9]+) \(label serial0\)")
_ATTACH_TIMEOUT_S = 15.0


class LabError(RuntimeError, InfrastructureError):
    """The emulated lab could not be started."""


class EmulatedBoard:
    """QEMU running the agent firmware, UART0 on a pty, monitor on a unix socket."""

    def __init__(
        self, firmware: Path, directory: Path, name: str, machine: str = DEFAULT_MACHINE
    ) -> None:
        self.name = name
        self.monitor_path = directory / f"{name}.monitor"
        output = directory / f"{name}.out"  # QEMU names the pty on stdout
        with output.open("wb") as stdout:
            self._process = ManagedProcess(
                [
                    QEMU,
                    "-M",
                    machine,
                    "-nographic",
                    "-monitor",
                    f"unix:{self.monitor_path},server=on,wait=off",
                    "-semihosting-config",
                    "enable=on,target=native",
                    "-kernel",
                    str(firmware),
                    "-serial",
                    "pty",
                ],
                name=f"qemu-{name}",
                stdout=stdout,
            )  # no -no-reboot: a reset would end QEMU
        deadline = time.monotonic() + 10.0
        while (match := _PTY.search(output.read_text(errors="replace"))) is None:
            if self._process.poll() is not None or time.monotonic() > deadline:
                self._process.stop()
                raise LabError(f"QEMU for {name} opened no pty:\n{self._process.stderr_tail()}")
            time.sleep(0.02)  # polling QEMU's output for the line it prints when ready
        self.pty = match.group(1)
        self.powered = True
        self.resets = 0

    def monitor(self, *commands: str) -> None:
        """Send HMP commands to QEMU's monitor, each answered before the next."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(5.0)
            sock.connect(str(self.monitor_path))
            _read_prompt(sock)
            for command in commands:
                sock.sendall(command.encode() + b"\n")
                _read_prompt(sock)

    def power(self, on: bool) -> None:
        if on:
            self.monitor("system_reset", "cont")
            self.resets += 1
        else:
            self.monitor("stop")
        self.powered = on

    def poll(self) -> int | None:
        """QEMU's exit status, or None while it runs."""
        return self._process.poll()

    def stop(self) -> None:
        self._process.stop()


def _read_prompt(sock: socket.socket) -> None:
    seen = b""
    while not seen.endswith(b"(qemu) "):
        chunk = sock.recv(4096)
        if not chunk:
            raise LabError("QEMU's monitor closed the connection")
        seen = seen[-64:] + chunk


class EmulatedPhone:
    """adb-emu on ``host``, attached to ``server`` (the exporter host's adb server)."""

    def __init__(self, directory: Path, name: str, host: str, server: PrivateAdbServer) -> None:
        self.name = name
        self.server = server
        self._adbd = AdbEmulator(directory / name, host=host, adb_keys=server.public_key)
        self._adbd.start()
        self.serial = self._adbd.endpoint.serial  # as `adb devices` lists it: HOST:PORT
        self._attach()
        self.powered = True

    def _attach(self) -> None:
        """``adb connect`` the phone and wait until the server lists it as a ``device``."""
        deadline = time.monotonic() + _ATTACH_TIMEOUT_S
        while True:
            self.server.adb("connect", self.serial, timeout=10.0)
            listed = self.server.adb("devices", timeout=10.0).stdout
            if f"{self.serial}\tdevice" in listed:
                return
            if time.monotonic() > deadline:
                raise LabError(f"adb server did not attach {self.name} ({self.serial}): {listed}")
            time.sleep(0.1)  # the server gives no notice when the connection is up

    def power(self, on: bool) -> None:
        if on:
            self._adbd.start()
            self._attach()
        else:
            self._adbd.kill()
        self.powered = on

    def stop(self) -> None:
        self.server.adb("disconnect", self.serial, timeout=10.0)
        self._adbd.stop()


class PoweredLinuxBoard:
    """A linux-emu board behind the stand-in switch, booted when made (see the module).

    Switched off while it boots, its QEMU is killed at once and the boot's thread let end
    (the board's labgrid drivers are that thread's until then)."""

    def __init__(self, board: LinuxEmulator) -> None:
        self.board = board
        self._booting: threading.Thread | None = None
        self.boot_error: BaseException | None = None  # the last background boot's failure
        board.start()
        self.powered = True

    def power(self, on: bool) -> None:
        if not on and self._booting is not None and self._booting.is_alive():
            self._kill_booting_qemu()
        self._wait_for_boot()
        if on and not self.powered:
            self._booting = threading.Thread(target=self._boot, daemon=True, name=self.board.alias)
            self._booting.start()
        elif not on:
            self.board.cut_power()
        self.powered = on

    def _boot(self) -> None:
        self.boot_error = None
        try:
            self.board.start()
        except Exception as exc:  # the board stays dark; its console log says why
            self.boot_error = exc

    def _kill_booting_qemu(self) -> None:
        """SIGKILL this process's QEMU that boots this board's flash (found by its argv)."""
        flash = os.fsencode(self.board.flash)
        for pid in descendants({os.getpid()}):
            with contextlib.suppress(OSError):
                if b"file=" + flash + b"," in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)

    def _wait_for_boot(self) -> None:
        if self._booting is not None:
            self._booting.join()
            self._booting = None

    def stop(self) -> None:
        self._wait_for_boot()
        self.board.stop()


class ConsoleFeed:
    """A Linux board's console as a lab's console server offers it: a raw TCP port on the
    exporter's address streaming what the console prints from the moment a client
    connects (read-only: the board's own labgrid drivers hold its console; what a client
    writes is dropped). It follows the board's ``console.log``."""

    _POLL_S = 0.1  # how often the log is looked at for new lines

    def __init__(self, host: str, log: Path) -> None:
        stopping = self._stopping = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                offset = log.stat().st_size if log.exists() else 0
                with contextlib.suppress(OSError):  # the client went
                    while not stopping.is_set():
                        if select.select([self.request], [], [], 0)[0] and not self.request.recv(
                            4096
                        ):
                            return  # the client closed: what it wrote is dropped
                        data = b""
                        with contextlib.suppress(FileNotFoundError), log.open("rb") as console:
                            console.seek(offset)
                            data = console.read(1 << 16)
                        offset += len(data)
                        self.request.sendall(data)
                        if not data:
                            stopping.wait(ConsoleFeed._POLL_S)  # a file tells no one it grew

        self.server = socketserver.ThreadingTCPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, daemon=True, name=f"console-feed:{host}"
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()


class _Powered(Protocol):
    powered: bool

    def power(self, on: bool) -> None: ...


class PowerSwitch:
    """The stand-in power switch of one exporter host: simplerest over HTTP, one relay
    (index) per device."""

    def __init__(self, host: str, boards: Sequence[_Powered]) -> None:
        boards_by_index = dict(enumerate(boards))

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name
                parts = self.path.strip("/").split("/")
                try:
                    board = boards_by_index[int(parts[1])]
                    if len(parts) == 3:
                        board.power(parts[2] == "1")
                    body = b"1" if board.powered else b"0"
                    self.send_response(200)
                except (IndexError, ValueError, KeyError, LabError, OSError):
                    body = b"bad request"
                    self.send_response(400)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}/relay/{{index}}/{{value}}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, daemon=True, name=f"power-switch:{host}"
        )
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
