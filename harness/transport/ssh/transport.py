"""Linux boards over SSH, with paramiko.

One SSH connection per transport, opened on first use, kept alive with keepalives
and reopened when it has died. Commands run in exec channels as shell text built
from argv with :func:`harness.transport.shell_line.shell_line` (every word quoted, so
arguments are data); files move over SFTP. The route to the board follows the profile and
``~/.ssh/config`` (Host aliases, HostName, Port, User, IdentityFile,
UserKnownHostsFile, ProxyJump, ProxyCommand).

Host keys are always verified, against a key or fingerprint pinned in the profile
or against known_hosts; an unknown or changed key raises :class:`HostKeyUnknown` /
:class:`HostKeyMismatch` before any credential or command is sent.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import secrets
import select
import shlex
import stat
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import paramiko

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
from harness.transport.shell_line import shell_line
from harness.transport.ssh.connection import (
    Connection,
    Watchdog,
    dial,
    end_process,
    spawn_proxy_command,
)
from harness.transport.ssh.exec_stream import SshStream, drain, is_id
from harness.transport.ssh.host_keys import (
    HostKeyPin,
)
from harness.transport.ssh.login import login
from harness.transport.ssh.route import (
    Hop,
    resolve_route,
)
from harness.transport.ssh.setting_errors import (
    HostKeyRejected,
)
from harness.transport.ssh.ssh_settings import (
    SshSettings,
)
from harness.transport.ssh.work_dir import ensure_private_work_dir

_ABIS = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_KILL_TIMEOUT = 5.0
# A push writes ``.NAME`` + this + 8 hex digits beside NAME, renamed to NAME once whole.
_STAGING = ".et-"


def _tracked(command: str) -> str:
    """``command`` behind a line with the shell's pid, which leads its process group.

    The shell stays the parent (``exit $?`` keeps it from exec'ing), so the exit
    code reports a death by signal N as 128+N, and the group can be killed.
    """
    return f"echo $$; {command}; exit $?"


class SshTransport(Transport):
    """A Linux board reached over SSH (see the module docstring)."""

    def __init__(self, profile: SshSettings) -> None:
        self.profile = profile
        self.route = resolve_route(profile)
        self._route_read = True  # False after close(): read again before the next connection
        self._pin = HostKeyPin.parse(profile.host_key) if profile.host_key else None
        self._connection: Connection | None = None
        self._lock = threading.Lock()
        self._facts: DeviceFacts | None = None
        self.name = f"ssh {profile.host}"

    # -- connection ---------------------------------------------------------

    def connect(self) -> None:
        """Open the connection now (it is otherwise opened on first use)."""
        self._live()

    def close(self) -> None:
        """Close the connection; the next use reads the route (ssh_config) again, so that
        it reaches a board that came back elsewhere (a restarted ssh-emu's new namespace)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            self._route_read = False

    def _live(self) -> Connection:
        with self._lock:
            if self._connection is not None and self._connection.alive():
                return self._connection
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            if not self._route_read:
                self.route = resolve_route(self.profile)
                self._route_read = True
            self._connection = self._open_route()
            return self._connection

    def _discard(self, connection: Connection) -> None:
        """Close ``connection`` so that the next :meth:`_live` dials afresh."""
        with self._lock:
            if self._connection is connection:
                self._connection = None
        connection.close()

    def _open_route(self) -> Connection:
        timeout = self.profile.connect_timeout
        clients: list[paramiko.SSHClient] = []
        proxy: ManagedProcess | None = None
        sock: Any = None
        try:
            for index, hop in enumerate(self.route):
                if index == 0 and hop.proxy_command:
                    sock, proxy = spawn_proxy_command(hop.proxy_command)
                elif index == 0:
                    sock = dial(hop, timeout)
                is_board = index == len(self.route) - 1
                clients.append(self._login(hop, sock, self._pin if is_board else None))
                if not is_board:
                    sock = self._tunnel(clients[-1], hop, self.route[index + 1], timeout)
        except BaseException as exc:
            for client in reversed(clients):
                client.close()
            if sock is not None:
                sock.close()
            proxy_said = end_process(proxy) if proxy is not None else ""
            if (
                proxy_said
                and isinstance(exc, DeviceUnavailable)
                and not isinstance(exc, HostKeyRejected)
            ):
                raise DeviceUnavailable(f"{exc}; the ProxyCommand said: {proxy_said}") from exc
            raise
        return Connection(clients, proxy)

    def _login(self, hop: Hop, sock: Any, pin: HostKeyPin | None) -> paramiko.SSHClient:
        return login(hop, sock, pin, self.profile)

    @staticmethod
    def _tunnel(
        client: paramiko.SSHClient, hop: Hop, target: Hop, timeout: float
    ) -> paramiko.Channel:
        transport = client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0), timeout=timeout
            )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise DeviceUnavailable(
                f"jump host {hop} could not reach {target.hostname}:{target.port}: "
                f"{exc or type(exc).__name__}"
            ) from None

    # -- processes ----------------------------------------------------------

    def _start(self, command: str, timeout: float) -> paramiko.Channel:
        """An exec channel running ``command``; reconnects once if the link had died."""
        for attempt in (1, 2):
            connection = self._live()
            try:
                channel = connection.transport.open_session(timeout=timeout)
                break
            except (paramiko.SSHException, OSError, EOFError) as exc:
                # A failed send (EOFError, OSError) means the link is gone even while
                # paramiko's reader thread has not noticed yet and calls it active.
                if connection.alive() and isinstance(exc, paramiko.SSHException):
                    raise TransportTimeout(
                        f"{self.name}: no channel within {timeout:.1f} s ({exc}): the device "
                        "is not answering"
                    ) from None
                self._discard(connection)
                if attempt == 2:
                    raise TransportLost(
                        f"{self.name}: connection lost while opening a channel"
                    ) from None
        with Watchdog(channel, timeout) as watchdog:
            try:
                channel.exec_command(command)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                channel.close()
                if watchdog.expired:
                    raise TransportTimeout(
                        f"{self.name}: the device did not start the command within {timeout:.1f} s"
                    ) from None
                raise self._lost_or_refused(f"starting the command: {exc}") from None
        return channel

    def _lost_or_refused(self, what: str) -> TransportError:
        connection = self._connection
        if connection is None or not connection.alive():
            return TransportLost(f"{self.name}: connection lost while {what}")
        return TransportError(f"{self.name}: the device refused {what}")

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> CommandResult:
        command = shell_line(argv, env)
        deadline = time.monotonic() + timeout
        channel = self._start(_tracked(command), timeout)
        stdout = bytearray()
        stderr = bytearray()
        try:
            finished = self._exchange(channel, stdin, deadline, stdout, stderr)
        finally:
            channel.close()
        pid, _, output = bytes(stdout).partition(b"\n")
        if not finished:
            fate = "killed" if self._kill_group(pid) else "could not be killed"
            raise TransportTimeout(
                f"{self.name}: `{shlex.join(argv)[:200]}` did not finish within {timeout:.1f} s"
                f" (it {fate})"
            )
        connection = self._connection
        if channel.exit_status == -1 and (connection is None or not connection.alive()):
            raise TransportLost(
                f"{self.name}: connection lost while `{shlex.join(argv)[:200]}` ran"
            )
        if not is_id(pid):
            raise TransportError(
                f"{self.name}: the login shell printed {pid[:80]!r} before the command's "
                "output; make the device user's shell start-up silent"
            )
        return CommandResult(tuple(argv), channel.exit_status, output, bytes(stderr))

    @staticmethod
    def _exchange(
        channel: paramiko.Channel,
        stdin: bytes,
        deadline: float,
        stdout: bytearray,
        stderr: bytearray,
    ) -> bool:
        """Feed stdin, collect both outputs until the exit status; False on timeout."""
        try:
            channel.settimeout(max(deadline - time.monotonic(), 0.001))
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
        except TimeoutError:
            return False
        except (OSError, paramiko.SSHException, EOFError):
            pass  # the process is gone; its outputs and status tell the rest
        channel.settimeout(0.0)
        out_open = err_open = True
        while out_open or err_open:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([channel], [], [], remaining)[0]:
                return False
            out_open = out_open and drain(channel.recv, stdout)
            err_open = err_open and drain(channel.recv_stderr, stderr)
        return channel.status_event.wait(max(deadline - time.monotonic(), 0.0))

    def _kill_group(self, pid: bytes) -> bool:
        """Best effort: kill the process group a timed-out or abandoned command leads;
        whether the device confirmed it."""
        if not is_id(pid):
            return False
        command = shell_line(["kill", "-9", f"-{int(pid)}"])  # the form every sh accepts
        try:
            channel = self._start(command, _KILL_TIMEOUT)
        except TransportError:
            return False  # the device is unreachable; the caller reports the original trouble
        try:
            deadline = time.monotonic() + _KILL_TIMEOUT
            done = self._exchange(channel, b"", deadline, bytearray(), bytearray())
        finally:
            channel.close()
        return done and channel.exit_status == 0

    def open_stream(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> SshStream:
        command = shell_line(argv, env)
        timeout = self.profile.connect_timeout
        channel = self._start(_tracked(command), timeout)
        describe = f"{self.name}: {posixpath.basename(argv[0])}"
        stream = SshStream(channel, describe, self._connection_alive, self._kill_group)
        try:
            stream.read_pid(timeout)
        except TransportError:
            stream.close()
            raise
        return stream

    def _connection_alive(self) -> bool:
        connection = self._connection
        return connection is not None and connection.alive()

    # -- files --------------------------------------------------------------

    def _sftp(self) -> paramiko.SFTPClient:
        connection = self._live()
        if connection.sftp is not None:
            return connection.sftp
        timeout = self.profile.connect_timeout
        try:
            channel = connection.transport.open_session(timeout=timeout)
            with Watchdog(channel, timeout):
                channel.invoke_subsystem("sftp")
            channel.settimeout(timeout)
            connection.sftp = paramiko.SFTPClient(channel)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise self._lost_or_refused(f"opening SFTP: {exc or type(exc).__name__}") from None
        return connection.sftp

    def push(self, local: Path, remote: str) -> None:
        sftp = self._sftp()
        directory, name = posixpath.split(remote)
        staging = posixpath.join(directory, f".{name}{_STAGING}{secrets.token_hex(4)}")
        try:
            _make_dirs(sftp, directory)
            sftp.put(str(local), staging)
            sftp.chmod(staging, stat.S_IMODE(local.stat().st_mode))
            # Renaming in place keeps a running copy intact (no ETXTBSY) and never
            # leaves a half-written file under the real name.
            sftp.posix_rename(staging, remote)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            if self._connection_alive():
                with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                    sftp.remove(staging)
            self._file_failure(exc, f"pushing {local} to {remote}")

    def remove_unfinished_pushes(self, directory: str, timeout: float = 30.0) -> None:
        """The staging files of pushes cut short under ``directory`` (:meth:`push`), removed."""
        staging = f".?*{_STAGING}{'?' * 8}"
        self.run(
            ["find", directory, "-type", "f", "-name", staging, "-exec", "rm", "-f", "--", "{}",
             "+"],
            timeout=timeout,
        )  # fmt: skip

    def pull(self, remote: str, local: Path) -> None:
        sftp = self._sftp()
        local.parent.mkdir(parents=True, exist_ok=True)
        staging = local.with_name(f".{local.name}.et-{secrets.token_hex(4)}")
        try:
            sftp.get(remote, str(staging))
            os.replace(staging, local)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            staging.unlink(missing_ok=True)
            self._file_failure(exc, f"pulling {remote}")

    def _file_failure(self, exc: BaseException, what: str) -> None:
        if isinstance(exc, TimeoutError):
            raise TransportTimeout(f"{self.name}: no answer while {what}") from None
        if not self._connection_alive():
            raise TransportLost(f"{self.name}: connection lost while {what}") from None
        if isinstance(exc, FileNotFoundError) or getattr(exc, "errno", None) == 2:
            raise FileNotFoundError(f"{self.name}: {what}: no such file or directory") from None
        raise TransportError(f"{self.name}: {what} failed: {exc}") from None

    # -- facts --------------------------------------------------------------

    def facts(self) -> DeviceFacts:
        if self._facts is None:
            result = self.run(["uname", "-s", "-m"], timeout=self.profile.connect_timeout)
            words = result.stdout.decode("utf-8", "replace").split()
            if result.exit_code != 0 or len(words) != 2:
                raise TransportError(f"{self.name}: `uname -s -m` failed: {result.stderr!r}")
            system, machine = words
            self._ensure_work_dir()
            self._facts = DeviceFacts(
                abi=_ABIS.get(machine, machine), os=system.lower(), work_dir=self.profile.work_dir
            )
        return self._facts

    def _ensure_work_dir(self) -> None:
        """Make ``work_dir``, refusing one another user of the board could change."""
        result = self.run(["id", "-u"], timeout=self.profile.connect_timeout)
        uid = result.stdout.strip()
        if result.exit_code != 0 or not is_id(uid):
            raise TransportError(f"{self.name}: `id -u` failed: {result.stderr!r}")
        work_dir = self.profile.work_dir
        try:
            ensure_private_work_dir(self._sftp(), work_dir, int(uid), self.profile.work_dir_where)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            self._file_failure(exc, f"making {work_dir}")


def _make_dirs(sftp: paramiko.SFTPClient, directory: str) -> None:
    if directory in ("", "/", "."):
        return
    try:
        sftp.stat(directory)
        return
    except FileNotFoundError:
        pass
    _make_dirs(sftp, posixpath.dirname(directory.rstrip("/")))
    try:
        sftp.mkdir(directory, 0o700)
    except OSError:
        sftp.stat(directory)  # made meanwhile by someone else is fine; else raise
