"""A remote process's stdin and stdout over one exec channel (:class:`SshStream`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import paramiko

from harness.transport.base import (
    ByteStream,
    TransportError,
    TransportLost,
    TransportTimeout,
)

_STDERR_TAIL_BYTES = 8192
_STREAM_CLOSE_GRACE = 2.0
_EXIT_STATUS_WAIT = 1.0
_KILL_TIMEOUT = 5.0


def _drain(read: Callable[[int], bytes], into: bytearray) -> bool:
    """Take what is buffered without blocking; False once the stream has ended."""
    while True:
        try:
            chunk = read(65536)
        except TimeoutError:
            return True
        if not chunk:
            return False
        into += chunk


class SshStream(ByteStream):
    """A remote process's stdin and stdout over one exec channel; stderr is kept as a tail."""

    def __init__(
        self,
        channel: paramiko.Channel,
        describe: str,
        connection_alive: Callable[[], bool],
        kill_group: Callable[[bytes], bool],
        write_timeout: float = 30.0,
    ) -> None:
        self._channel = channel
        self._describe = describe
        self._connection_alive = connection_alive
        self._kill_group = kill_group
        self._write_timeout = write_timeout
        self._buffer = bytearray()
        self._stderr = bytearray()
        self._pid = b""
        self._closed = False
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, name=f"stderr:{describe}", daemon=True
        )
        self._stderr_thread.start()

    def _drain_stderr(self) -> None:
        while True:
            try:
                chunk = self._channel.recv_stderr(4096)
            except TimeoutError:
                continue  # the channel's timeout is set by the reader; keep waiting
            if not chunk:
                return
            self._stderr += chunk
            del self._stderr[:-_STDERR_TAIL_BYTES]

    def read_pid(self, timeout: float) -> None:
        """Read the line the tracking wrapper prints first (see :func:`_tracked`)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            self._fill(deadline, timeout)
        pid, _, rest = bytes(self._buffer).partition(b"\n")
        if not pid.isdigit():
            raise TransportError(
                f"{self._describe}: the login shell printed {pid[:80]!r} before the "
                "program's output; make the device user's shell start-up silent"
            )
        self._pid = pid
        self._buffer = bytearray(rest)

    def _lost(self, what: str) -> TransportLost:
        # The exit status follows the end of output closely; give it a moment to arrive.
        self._channel.status_event.wait(_EXIT_STATUS_WAIT)
        if not self._connection_alive():
            cause = "the connection to the device was lost"
        elif self._channel.exit_status_ready():
            cause = f"the process exited with status {self._channel.exit_status}"
        else:
            cause = "the process closed its output"
        tail = self.stderr_tail()
        detail = f"; its stderr ends with:\n{tail}" if tail else ""
        return TransportLost(f"{self._describe}: {what}: {cause}{detail}")

    def _fill(self, deadline: float, timeout: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TransportTimeout(
                f"{self._describe}: no answer within {timeout:.1f} s "
                f"(have {len(self._buffer)} bytes)"
            )
        self._channel.settimeout(remaining)
        try:
            chunk = self._channel.recv(65536)
        except TimeoutError:
            return
        except (OSError, paramiko.SSHException, EOFError):
            chunk = b""
        if not chunk:
            self._stderr_thread.join(timeout=1)
            raise self._lost("reading")
        self._buffer += chunk

    def read_exact(self, size: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self._buffer) < size:
            self._fill(deadline, timeout)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def write(self, data: bytes) -> None:
        if self._channel.closed or self._channel.exit_status_ready():
            raise self._lost("writing")
        self._channel.settimeout(self._write_timeout)
        try:
            self._channel.sendall(data)
        except TimeoutError:
            raise TransportTimeout(
                f"{self._describe}: the process took no input for {self._write_timeout:.0f} s"
            ) from None
        except (OSError, paramiko.SSHException, EOFError):
            raise self._lost("writing") from None

    def stderr_tail(self) -> str:
        lines = bytes(self._stderr).decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-40:])

    def close(self) -> None:
        """Close stdin; kill the process group if it has not exited within a grace period."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._channel.exit_status_ready():
                with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                    self._channel.shutdown_write()
                if not self._channel.status_event.wait(_STREAM_CLOSE_GRACE):
                    self._kill_group(self._pid)
        finally:
            self._channel.close()
            self._stderr_thread.join(timeout=1)
