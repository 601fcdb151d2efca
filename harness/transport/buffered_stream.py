"""The reading half every :class:`ByteStream` to a program shares: chunks into a buffer,
bounded waits, and errors that end with what the program wrote to stderr.

:class:`~harness.transport.process_stream.ProcessStream` (a local child's pipes) and
:class:`~harness.transport.ssh.exec_stream.SshStream` (an SSH exec channel) differ only in
how a chunk is received and in what a lost stream says about the program.
"""

from __future__ import annotations

import abc
import time

from harness.transport.base import ByteStream, TransportLost, TransportTimeout

CHUNK = 65536  # bytes asked for per receive


class BufferedStream(ByteStream):
    """A stream read in chunks; subclasses say how to receive one and how the program is."""

    def __init__(self, describe: str, end_of_output: str) -> None:
        self._describe = describe
        self._end_of_output = end_of_output  # what a read that met the end says
        self._buffer = bytearray()
        self._stalled = False  # a read timed out: the program is not answering

    @abc.abstractmethod
    def _receive(self, timeout: float) -> bytes | None:
        """Up to :data:`CHUNK` bytes: None if none came within ``timeout``, ``b""`` once
        the output has ended (after which :meth:`stderr_tail` is complete)."""

    @abc.abstractmethod
    def _state(self) -> str:
        """What is known of the program when the stream is lost, appended to the message
        (e.g. ``" (exit code 1)"``)."""

    def _settle(self) -> None:
        """Before a lost stream is described: let what the program still says arrive (a
        process stream waits, bounded, for the process to end and its stderr to drain)."""

    def _lost(self, what: str) -> TransportLost:
        self._settle()  # a write can fail before the reason reached stderr's tail
        tail = self.stderr_tail()
        detail = f"; its stderr ends with:\n{tail}" if tail else ""
        return TransportLost(f"{self._describe}: {what}{self._state()}{detail}")

    def _fill(self, deadline: float, timeout: float, size: int | None) -> None:
        """Receive one chunk into the buffer before ``deadline``, for a read of ``size``
        bytes (None: of a line)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self._stalled = True
            have = len(self._buffer)
            got = f"got {have} of {size} bytes" if size else f"got {have} bytes, no line yet"
            raise TransportTimeout(f"{self._describe}: no answer within {timeout:.1f} s ({got})")
        chunk = self._receive(remaining)
        if chunk is None:
            return
        if not chunk:
            raise self._lost(self._end_of_output)
        self._buffer += chunk

    def read_exact(self, size: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self._buffer) < size:
            self._fill(deadline, timeout, size)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data
