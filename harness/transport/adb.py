"""Android devices through the real ``adb`` client.

Every host-side call is an argv list. The device side of ``adb shell`` is one shell
command line, so it is built here from argv with :func:`shlex.quote` on every word
(:func:`device_command`). Commands use shell protocol v2 (Android 7+): separate
stdout and stderr, stdin that streams, and exit codes.

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
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.transport.base import (
    ByteStream,
    CommandResult,
    DeviceFacts,
    DeviceUnavailable,
    Transport,
    TransportError,
    TransportLost,
    TransportTimeout,
)

DEFAULT_WORK_DIR = "/data/local/tmp/et-harness"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TRANSIENT_STATES = ("connecting", "authorizing", "offline")
_SETTINGS = ("serial", "server_host", "server_port", "connect", "adb")


@dataclass(frozen=True)
class AdbTarget:
    """Which device, through which adb server: the ``transport`` fields of an adb profile.

    ``serial`` falls back to ``$ANDROID_SERIAL``, then to the only attached device.
    ``connect`` (``host:port``) makes the transport ``adb connect`` a TCP device first;
    its serial is then ``connect`` unless ``serial`` says otherwise.
    """

    serial: str | None = None
    server_host: str | None = None  # adb -H: an adb server on another machine
    server_port: int | None = None  # adb -P: default 5037 or $ANDROID_ADB_SERVER_PORT
    connect: str | None = None
    adb: str = "adb"
    work_dir: str = DEFAULT_WORK_DIR
    query_timeout: float = 20.0  # adb devices / connect / features
    transfer_timeout: float = 120.0  # one push or pull
    write_timeout: float = 30.0  # one ByteStream.write

    @classmethod
    def from_profile(cls, profile: Any) -> AdbTarget:
        """Build from a :class:`harness.profile.DeviceProfile` whose transport kind is adb."""
        from harness.profile import ProfileError

        settings = dict(profile.settings)
        unknown = sorted(set(settings) - set(_SETTINGS))
        if unknown:
            raise ProfileError(
                f"{profile.where('transport.' + unknown[0])}: unknown adb setting; "
                f"allowed: {', '.join(_SETTINGS)}"
            )
        for key in ("serial", "server_host", "connect", "adb"):
            if key in settings and not isinstance(settings[key], str):
                raise ProfileError(
                    f"{profile.where('transport.' + key)}: must be a string; got {settings[key]!r}"
                )
        port = settings.get("server_port")
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
            raise ProfileError(
                f"{profile.where('transport.server_port')}: must be a TCP port; got {port!r}"
            )
        connect = settings.get("connect")
        if connect is not None and not re.fullmatch(r"[^\s:]+:\d+|\[[0-9a-fA-F:.]+\]:\d+", connect):
            raise ProfileError(
                f"{profile.where('transport.connect')}: must be host:port; got {connect!r}"
            )
        return cls(
            serial=settings.get("serial"),
            server_host=settings.get("server_host"),
            server_port=port,
            connect=connect,
            adb=settings.get("adb", "adb"),
            work_dir=profile.work_dir,
            query_timeout=profile.timeouts.connect,
            transfer_timeout=profile.timeouts.command,
        )


def device_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The device shell line that runs ``argv`` with ``env``, every word quoted."""
    if not argv:
        raise ValueError("argv is empty: give the program to run")
    exports = []
    for key, value in (env or {}).items():
        if not _ENV_NAME.match(key):
            raise ValueError(f"environment variable name {key!r}: use letters, digits and _")
        exports.append(f"export {key}={shlex.quote(value)}; ")
    return "".join(exports) + shlex.join(argv)


class AdbTransport(Transport):
    """Files and processes on one Android device, through the ``adb`` client."""

    def __init__(self, target: AdbTarget = AdbTarget()) -> None:
        self.target = target
        self._serial: str | None = None
        self._facts: DeviceFacts | None = None

    # -- device selection ------------------------------------------------------------

    @property
    def serial(self) -> str:
        """The device's serial, once it is found attached and usable."""
        if self._serial is None:
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
        if result.returncode != 0 or "connected to" not in said:
            raise DeviceUnavailable(
                f"adb connect {self.target.connect} failed: {said}; "
                "is the device's adbd listening there (adb tcpip, or adb-emu running)?"
            )

    def _await_ready(self, serial: str) -> None:
        """Wait (bounded) through transient states; raise a precise error for the rest."""
        deadline = time.monotonic() + self.target.query_timeout
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
            if state in _TRANSIENT_STATES and time.monotonic() < deadline:
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
            self._raise_for_client_error(serial, f"push {local} to {remote}", result.stderr)
            raise TransportError(f"adb push {local} to {serial}:{remote} failed: {_text(result.stderr)}")

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
        if b"does not exist" in result.stderr or b"No such file" in result.stderr:
            raise FileNotFoundError(f"{serial}:{remote} does not exist")
        self._raise_for_client_error(serial, f"pull {remote}", result.stderr)
        raise TransportError(f"adb pull {serial}:{remote} failed: {_text(result.stderr)}")

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> CommandResult:
        marker = f"et-harness-exit-{secrets.token_hex(8)}"
        script = f"{device_command(argv, env)}; printf '%s:%d\\n' {marker} \"$?\" >&2"
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
                f"{result.returncode}, device now {self._state_now(serial)}): {_tail(result.stderr)}"
            )
        return CommandResult(
            argv=tuple(argv),
            exit_code=int(found.group(1)),
            stdout=result.stdout,
            stderr=result.stderr[: found.start()],
        )

    def sha256(self, remote: str, timeout: float = 30.0) -> str | None:
        """SHA-256 of a device file, read on stdin so that no file name is echoed back.

        (``sha256sum NAME`` escapes names holding a newline or backslash with a leading
        ``\\``, which the base implementation would take for part of the digest.)
        """
        result = self.run(["sh", "-c", 'sha256sum < "$1"', "sh", remote], timeout=timeout)
        if result.exit_code != 0:
            return None
        return result.stdout.split(b" ", 1)[0].decode("ascii")

    def open_stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> ByteStream:
        serial = self.serial
        command = shlex.join(argv)
        process = subprocess.Popen(
            [*self._base_argv(), "-s", serial, "shell", _exec_line(argv, env)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        return AdbShellStream(
            process,
            description=f"{command} on {serial}",
            write_timeout=self.target.write_timeout,
            device_state=lambda: self._state_now(serial),
        )

    # -- adb client ------------------------------------------------------------------

    def _base_argv(self) -> list[str]:
        argv = [self.target.adb]
        if self.target.server_host:
            argv += ["-H", self.target.server_host]
        if self.target.server_port:
            argv += ["-P", str(self.target.server_port)]
        return argv

    def _server(self) -> str:
        host = self.target.server_host or "localhost"
        port = self.target.server_port or os.environ.get("ANDROID_ADB_SERVER_PORT", "5037")
        return f"{host}:{port}"

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


class AdbShellStream(ByteStream):
    """stdin and stdout of a device process, through an ``adb shell`` client process."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        *,
        description: str,
        write_timeout: float,
        device_state: Callable[[], str],
    ) -> None:
        self._process = process
        self._description = description
        self._write_timeout = write_timeout
        self._device_state = device_state
        self._buffer = bytearray()
        self._eof = False
        self._ready = threading.Condition()
        self._stderr: deque[str] = deque(maxlen=20)
        self._closed = False
        assert process.stdin is not None
        os.set_blocking(process.stdin.fileno(), False)
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def write(self, data: bytes) -> None:
        if self._closed:
            raise TransportLost(f"{self._description}: the stream is closed")
        assert self._process.stdin is not None
        fd = self._process.stdin.fileno()
        view = memoryview(data)
        deadline = time.monotonic() + self._write_timeout
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportTimeout(
                    f"{self._description}: could not send {len(view)} more bytes within "
                    f"{self._write_timeout:g} s (the device does not read its input)"
                )
            select.select([], [fd], [], remaining)
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._lost("could not write") from None

    def read_exact(self, size: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        with self._ready:
            while len(self._buffer) < size and not self._eof:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TransportTimeout(
                        f"{self._description}: {len(self._buffer)} of {size} bytes arrived "
                        f"within {timeout:g} s"
                    )
                self._ready.wait(remaining)
            if len(self._buffer) < size:
                raise self._lost(f"the output ended after {len(self._buffer)} of {size} bytes")
            data = bytes(self._buffer[:size])
            del self._buffer[:size]
            return data

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        assert self._process.stdin is not None
        try:
            self._process.stdin.close()
        except OSError:
            pass
        if self._process.poll() is None:
            self._process.terminate()  # the server closes the stream; adbd kills the process
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for thread in self._threads:
            thread.join(5)

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    def _lost(self, what: str) -> TransportLost:
        code = self._process.poll()
        return TransportLost(
            f"{self._description}: {what}; adb shell "
            f"{'is still running' if code is None else f'exited with {code}'}, device "
            f"{self._device_state()}; stderr: {self.stderr_tail() or '(empty)'}"
        )

    def _pump_stdout(self) -> None:
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        while chunk := os.read(fd, 65536):
            with self._ready:
                self._buffer += chunk
                self._ready.notify_all()
        with self._ready:
            self._eof = True
            self._ready.notify_all()

    def _pump_stderr(self) -> None:
        assert self._process.stderr is not None
        for line in self._process.stderr:
            self._stderr.append(line.decode("utf-8", "replace").rstrip("\n"))


def _exec_line(argv: Sequence[str], env: Mapping[str, str] | None) -> str:
    """Like :func:`device_command`, with ``exec`` so the shell becomes the program."""
    exports = device_command(["true"], env).removesuffix("true")
    return exports + "exec " + shlex.join(argv)


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
