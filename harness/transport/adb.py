"""Android devices through the real ``adb`` client.

Every host-side call is an argv list. The device side of ``adb shell`` is one shell
command line, built from argv with every word quoted
(:func:`harness.transport.shell_line.shell_line`). Commands use shell protocol v2
(Android 7+): separate stdout and stderr, stdin that streams, and exit codes.

adb 1.0.41 exits 0 when a device disappears in the middle of ``adb shell``, so
:meth:`AdbTransport.run` does not trust the client's exit code: the device command
ends by writing ``<marker>:<exit code>`` to stderr, with a random marker per call, and
a run whose stderr lacks it was cut off (:class:`TransportLost`).
"""

from __future__ import annotations

import os
import re
import secrets
import select
import shlex
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.lifecycle.process import ManagedProcess
from harness.transport.base import (
    CommandResult,
    DeviceFacts,
    DeviceUnavailable,
    Transport,
    TransportError,
    TransportLost,
    TransportTimeout,
)
from harness.transport.process_stream import ProcessStream, start_stream_process
from harness.transport.shell_line import shell_line

DEFAULT_WORK_DIR = "/data/local/tmp/et-harness"
_TRANSIENT_STATES = ("connecting", "authorizing")
_OFFLINE_SETTLE = 3.0  # seconds an offline device may take to come up (fresh USB or connect)
# Which adb client runs is the user's choice, never a profile's (docs/security.md).
ADB_ENV = "ET_HARNESS_ADB"


@dataclass(frozen=True)
class AdbSettings:
    """Which device, through which adb server: the ``transport`` fields of an adb profile.

    ``serial`` falls back to ``$ANDROID_SERIAL``, then to the only attached device.
    ``connect`` (``host:port``) makes the transport ``adb connect`` a TCP device first;
    its serial is then ``connect`` unless ``serial`` says otherwise.
    """

    serial: str | None = None
    server_host: str | None = None  # adb -H: an adb server on another machine
    server_port: int | None = None  # adb -P: default 5037 or $ANDROID_ADB_SERVER_PORT
    connect: str | None = None
    adb: str = field(default_factory=lambda: adb_client())
    work_dir: str = DEFAULT_WORK_DIR
    query_timeout: float = 20.0  # adb devices / connect / features
    transfer_timeout: float = 120.0  # one push or pull
    write_timeout: float = 30.0  # one ByteStream.write


def adb_client() -> str:
    """The adb client to run: ``$ET_HARNESS_ADB`` if the user set it, else ``adb`` from PATH."""
    return os.environ.get(ADB_ENV) or "adb"


def adb_server_answers(host: str, port: int, timeout: float) -> bool:
    """Whether an adb server at ``host:port`` answers ``host:version``, the request each
    client starts with. Asked without the client, which would start a server itself."""
    request = b"host:version"
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"%04x%s" % (len(request), request))
            return sock.recv(4) == b"OKAY"
    except OSError:
        return False


class AdbTransport(Transport):
    """Files and processes on one Android device, through the ``adb`` client."""

    def __init__(self, target: AdbSettings = AdbSettings()) -> None:
        self.target = target
        self._serial: str | None = None
        self._facts: DeviceFacts | None = None

    def close(self) -> None:
        """Forget the device (every command is its own ``adb`` client process): the next
        use finds it afresh (``adb connect`` again, e.g. to a restarted emulator)."""
        self._serial = None

    # -- device selection ------------------------------------------------------------

    @property
    def serial(self) -> str:
        """The device's serial, once it is found attached and usable."""
        if self._serial is None:
            self._require_server()
            serial = self._select_serial()
            self._await_ready(serial)
            self._require_shell_v2(serial)
            self._serial = serial
        return self._serial

    def devices(self) -> dict[str, str]:
        """``adb devices``: serial -> state (device, offline, unauthorized, ...)."""
        result = self._adb(["devices"], timeout=self.target.query_timeout)
        if result.returncode != 0:
            raise DeviceUnavailable(
                f"the adb server at {self._server()} does not answer: {_text(result.stderr)}; "
                "start it with `adb start-server` (or check transport.server_host/server_port)"
            )
        found = {}
        for line in _text(result.stdout).splitlines():
            serial, tab, state = line.partition("\t")
            if tab:
                found[serial] = state.strip()
        return found

    def _require_server(self) -> None:
        """Refuse to go on without a running adb server: the client would start one in the
        background (for ``localhost``), which would outlive the run."""
        port = self._server_port()
        if not port.isdecimal() or not 0 < int(port) < 65536:
            raise DeviceUnavailable(
                f"$ANDROID_ADB_SERVER_PORT is {port!r}, not a TCP port: unset it, or set "
                "transport.server_port"
            )
        host = self._server_host().strip("[]")
        if not adb_server_answers(host, int(port), self.target.query_timeout):
            raise DeviceUnavailable(
                f"the adb server at {self._server()} does not answer; start it with "
                "`adb start-server` (the harness starts none: it would outlive the run), "
                "or check transport.server_host/server_port"
            )

    def _select_serial(self) -> str:
        if self.target.connect:
            self._connect()
            return self.target.serial or self.target.connect
        if self.target.serial:
            return self.target.serial
        if os.environ.get("ANDROID_SERIAL"):
            return os.environ["ANDROID_SERIAL"]
        attached = self.devices()
        if not attached:
            raise DeviceUnavailable(
                f"no Android device is attached to the adb server at {self._server()}: plug one "
                "in with USB debugging on, or set transport.connect (host:port) for a TCP device"
            )
        if len(attached) > 1:
            listing = ", ".join(f"{s} ({state})" for s, state in sorted(attached.items()))
            raise DeviceUnavailable(
                f"{len(attached)} devices are attached ({listing}) and none is chosen: set "
                "transport.serial in the device profile, or ANDROID_SERIAL, to one of them"
            )
        return next(iter(attached))

    def _connect(self) -> None:
        assert self.target.connect is not None
        result = self._adb(["connect", self.target.connect], timeout=self.target.query_timeout)
        said = _text(result.stdout + result.stderr)
        if "failed to authenticate" in said:
            return  # attached but unauthorized: _await_ready says what to do
        if result.returncode != 0 or "connected to" not in said:
            raise DeviceUnavailable(
                f"adb connect {self.target.connect} failed: {said}; "
                "is the device's adbd listening there (adb tcpip, or adb-emu running)?"
            )

    def _await_ready(self, serial: str) -> None:
        """Wait (bounded) through transient states; raise a precise error for the rest."""
        started = time.monotonic()
        deadline = started + self.target.query_timeout
        offline_deadline = started + min(_OFFLINE_SETTLE, self.target.query_timeout)
        reconnected = False
        while True:
            attached = self.devices()
            state = attached.get(serial)
            if state == "device":
                return
            if state == "offline" and self.target.connect and not reconnected:
                # A restarted adbd on TCP stays offline until disconnect + connect.
                self._adb(["disconnect", self.target.connect], timeout=self.target.query_timeout)
                self._connect()
                reconnected = True
                continue
            now = time.monotonic()
            if (state in _TRANSIENT_STATES and now < deadline) or (
                state == "offline" and now < offline_deadline
            ):
                time.sleep(0.05)
                continue
            raise DeviceUnavailable(_state_problem(serial, state, attached, self._server()))

    def _require_shell_v2(self, serial: str) -> None:
        result = self._adb(["-s", serial, "features"], timeout=self.target.query_timeout)
        features = _text(result.stdout).split()
        if result.returncode == 0 and "shell_v2" not in features:
            raise DeviceUnavailable(
                f"device {serial} has no shell_v2 (Android older than 7?): the harness needs "
                "separate stdout/stderr and exit codes"
            )

    # -- Transport -----------------------------------------------------------------

    def facts(self) -> DeviceFacts:
        if self._facts is None:
            result = self.run(["getprop", "ro.product.cpu.abi"], timeout=self.target.query_timeout)
            abi = _text(result.stdout)
            if result.exit_code != 0 or not abi:
                raise TransportError(
                    f"device {self.serial}: getprop ro.product.cpu.abi gave no ABI "
                    f"(exit {result.exit_code}): {_text(result.stderr)}"
                )
            self._facts = DeviceFacts(abi=abi, os="android", work_dir=self.target.work_dir)
        return self._facts

    def push(self, local: Path, remote: str) -> None:
        _require_absolute(remote)
        local = Path(local).resolve()
        if not local.is_file():
            raise FileNotFoundError(f"cannot push {local}: no such file")
        serial = self.serial
        result = self._adb(
            ["-s", serial, "push", str(local), remote],
            timeout=self.target.transfer_timeout,
            what=f"adb push {local} {remote}",
        )
        if result.returncode != 0:
            said = result.stdout + result.stderr  # adb 1.0.41 reports sync errors on stdout
            self._raise_for_client_error(serial, f"push {local} to {remote}", said)
            raise TransportError(f"adb push {local} to {serial}:{remote} failed: {_tail(said)}")

    def pull(self, remote: str, local: Path) -> None:
        _require_absolute(remote)
        local = Path(local).resolve()
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(f".{local.name}.{secrets.token_hex(4)}.partial")
        serial = self.serial
        try:
            result = self._adb(
                ["-s", serial, "pull", remote, str(partial)],
                timeout=self.target.transfer_timeout,
                what=f"adb pull {remote} {local}",
            )
            if result.returncode == 0:
                os.replace(partial, local)
                return
        finally:
            partial.unlink(missing_ok=True)
        said = result.stdout + result.stderr  # adb 1.0.41 reports sync errors on stdout
        self._raise_for_client_error(serial, f"pull {remote}", said)
        if b"does not exist" in said or b"No such file" in said:
            raise FileNotFoundError(f"{serial}:{remote} does not exist")
        raise TransportError(f"adb pull {serial}:{remote} failed: {_tail(said)}")

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> CommandResult:
        marker = f"et-harness-exit-{secrets.token_hex(8)}"
        script = f"{shell_line(argv, env)}; printf '%s:%d\\n' {marker} \"$?\" >&2"
        serial = self.serial
        result = self._adb(
            ["-s", serial, "shell", script],
            timeout=timeout,
            stdin=stdin,
            what=f"{shlex.join(argv)} on {serial}",
        )
        found = re.search(rf"{marker}:(\d+)\n\Z".encode(), result.stderr)
        if found is None:
            self._serial = None  # find the device afresh next time
            self._raise_for_client_error(serial, shlex.join(argv), result.stderr)
            raise TransportLost(
                f"{shlex.join(argv)} on {serial} was cut off before it finished (adb exit "
                f"{result.returncode}, device now {self._state_now(serial)}): "
                f"{_tail(result.stderr)}"
            )
        return CommandResult(
            argv=tuple(argv),
            exit_code=int(found.group(1)),
            stdout=result.stdout,
            stderr=result.stderr[: found.start()],
        )

    def open_stream(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> AdbShellStream:
        serial = self.serial
        command = shlex.join(argv)
        process = start_stream_process(
            [*self._base_argv(), "-s", serial, "shell", shell_line(argv, env, exec_program=True)],
            name="adb shell",
        )
        return AdbShellStream(
            process,
            f"{command} on {serial}",
            write_timeout=self.target.write_timeout,
            device_state=lambda: self._state_now(serial),
        )

    # -- adb client ------------------------------------------------------------------

    def _base_argv(self) -> list[str]:
        argv = [self.target.adb, "-H", self._server_host()]
        if self.target.server_port:
            argv += ["-P", str(self.target.server_port)]
        return argv

    def _server_host(self) -> str:
        """The server's host as adb's -H takes it: an IPv6 address in brackets (adb reads a
        bare '::1' as host '::1:PORT' and the default port); ``127.0.0.1`` for none or
        ``localhost``, the only name for which the client forks a server when it finds
        none (one that would outlive the run)."""
        host = self.target.server_host or "127.0.0.1"
        if host == "localhost":
            host = "127.0.0.1"
        return f"[{host}]" if ":" in host else host

    def _server(self) -> str:
        return f"{self._server_host()}:{self._server_port()}"

    def _server_port(self) -> str:
        """The server's port as the client picks it: the profile's, the environment's, 5037."""
        return str(self.target.server_port or os.environ.get("ANDROID_ADB_SERVER_PORT", "5037"))

    def _adb(
        self,
        args: list[str],
        *,
        timeout: float,
        stdin: bytes = b"",
        what: str | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        argv = [*self._base_argv(), *args]
        try:
            return subprocess.run(
                argv,
                input=stdin if stdin else None,
                stdin=None if stdin else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise TransportTimeout(
                f"{what or shlex.join(argv)} did not finish within {timeout:g} s; it was stopped"
            ) from None
        except FileNotFoundError:
            raise DeviceUnavailable(
                f"the adb client {self.target.adb!r} is not installed (apt-get install adb)"
            ) from None

    def _state_now(self, serial: str) -> str:
        try:
            return self.devices().get(serial, "not attached")
        except TransportError as exc:
            return f"unknown ({exc})"

    def _raise_for_client_error(self, serial: str, what: str, stderr: bytes) -> None:
        """Raise DeviceUnavailable if the adb client refused to reach the device at all."""
        said = _text(stderr)
        if re.search(r"^(adb: )?error: (device|no devices|more than one)", said, re.MULTILINE):
            self._serial = None
            attached = self.devices()
            raise DeviceUnavailable(
                f"{what}: {_state_problem(serial, attached.get(serial), attached, self._server())}"
            )


class AdbShellStream(ProcessStream):
    """stdin and stdout of a device process, through a local ``adb shell`` client.

    Writes are bounded in time (a device that stops reading its input raises
    :class:`TransportTimeout` instead of blocking), and closing ends the client at once:
    the adb server then closes the stream and adbd kills the device process.
    """

    def __init__(
        self, process: ManagedProcess, describe: str, write_timeout: float,
        device_state: Callable[[], str],
    ) -> None:  # fmt: skip
        super().__init__(process, describe, lost_hint=lambda: f"; device state: {device_state()}")
        self._write_timeout = write_timeout
        assert process.popen.stdin is not None
        self._stdin_fd = process.popen.stdin.fileno()
        os.set_blocking(self._stdin_fd, False)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = time.monotonic() + self._write_timeout
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportTimeout(
                    f"{self._describe}: could not send {len(view)} more bytes within "
                    f"{self._write_timeout:g} s (the device does not read its input)"
                )
            select.select([], [self._stdin_fd], [], remaining)
            try:
                view = view[os.write(self._stdin_fd, view) :]
            except BlockingIOError:
                continue
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise self._lost(f"writing failed: {exc}") from None

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
        super().close()


def _require_absolute(remote: str) -> None:
    if not remote.startswith("/"):
        raise ValueError(f"device path {remote!r} must be absolute (e.g. under /data/local/tmp)")


def _state_problem(serial: str, state: str | None, attached: Mapping[str, str], server: str) -> str:
    """What is wrong with ``serial`` in ``state``, and how to fix it."""
    if state is None:
        others = ", ".join(f"{s} ({st})" for s, st in sorted(attached.items())) or "none"
        return (
            f"device {serial} is not attached to the adb server at {server} (attached: {others}); "
            "check the cable or `adb connect`, or fix transport.serial / ANDROID_SERIAL"
        )
    if state == "unauthorized":
        return (
            f"device {serial} is unauthorized: accept the 'Allow USB debugging' prompt on the "
            "device for this computer's key ($HOME/.android/adbkey.pub), then retry"
        )
    if state == "offline":
        return (
            f"device {serial} is offline: replug it, or for a TCP device run "
            f"`adb disconnect {serial}` then `adb connect {serial}`"
        )
    return f"device {serial} is in state {state!r}, not 'device': boot it normally, then retry"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip()


def _tail(data: bytes, lines: int = 5) -> str:
    return "\n".join(_text(data).splitlines()[-lines:]) or "(no stderr)"
