"""A remote process's stdin and stdout over one exec channel (:class:`SshStream`)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable

import paramiko

from harness.lifecycle.stderr_tail import StderrTail
from harness.transport.base import TransportError, TransportTimeout
from harness.transport.buffered_stream import CHUNK, BufferedStream

_STREAM_CLOSE_GRACE = 2.0
_EXIT_STATUS_WAIT = 1.0
_ID = re.compile(rb"0|[1-9][0-9]{0,9}")  # as `echo $$` and `id -u` print a pid and a uid


def is_id(line: bytes) -> bool:
    """Whether a line the device printed is a pid or uid: bounded, so that a hostile login
    shell's line of 5000 digits is a :class:`TransportError`, not int()'s ValueError."""
    return _ID.fullmatch(line) is not None


def drain(read: Callable[[int], bytes], into: bytearray) -> bool:
    """Take what is buffered without blocking; False once the stream has ended."""
    while True:
        try:
            chunk = read(65536)
        except TimeoutError:
            return True
        if not chunk:
            return False
        into += chunk


class SshStream(BufferedStream):
    """A remote process's stdin and stdout over one exec channel; stderr is kept as a tail."""

    def __init__(
        self,
        channel: paramiko.Channel,
        describe: str,
        connection_alive: Callable[[], bool],
        kill_group: Callable[[bytes], bool],
        write_timeout: float = 30.0,
    ) -> None:
        super().__init__(describe, end_of_output="reading")
        self._channel = channel
        self._connection_alive = connection_alive
        self._kill_group = kill_group
        self._write_timeout = write_timeout
        self._pid = b""
        self._closed = False
        self._stderr = StderrTail(lambda: channel.recv_stderr(4096), name=describe)

    def read_pid(self, timeout: float) -> None:
        """Read the line the tracking wrapper prints first (see :func:`_tracked`)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            self._fill(deadline, timeout, None)
        pid, _, rest = bytes(self._buffer).partition(b"\n")
        if not is_id(pid):
            raise TransportError(
                f"{self._describe}: the login shell printed {pid[:80]!r} before the "
                "program's output; make the device user's shell start-up silent"
            )
        self._pid = pid
        self._buffer = bytearray(rest)

    def _state(self) -> str:
        # The exit status follows the end of output closely; give it a moment to arrive.
        self._channel.status_event.wait(_EXIT_STATUS_WAIT)
        if not self._connection_alive():
            return ": the connection to the device was lost"
        if self._channel.exit_status_ready():
            return f": the process exited with status {self._channel.exit_status}"
        return ": the process closed its output"

    def _receive(self, timeout: float) -> bytes | None:
        self._channel.settimeout(timeout)
        try:
            chunk = self._channel.recv(CHUNK)
        except TimeoutError:
            return None
        except (OSError, paramiko.SSHException, EOFError):
            chunk = b""
        if not chunk:
            self._stderr.join(timeout=1)  # so that the tail is complete
        return chunk

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
        return self._stderr.text()

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
            self._stderr.join(timeout=1)
