"""A :class:`ByteStream` over a local child process's stdin and stdout.

Used by the host transport directly, and by transports whose client is a local
program (``adb shell``, ``ssh``) that relays the remote process's streams.
"""

from __future__ import annotations

import collections
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable

from harness.transport.base import ByteStream, TransportLost, TransportTimeout

_STDERR_TAIL_LINES = 40


class ProcessStream(ByteStream):
    """Talks to ``process`` through its pipes; stderr is kept as a bounded tail."""

    def __init__(self, process: subprocess.Popen, describe: str,
                 lost_hint: Callable[[], str] | None = None) -> None:
        if process.stdin is None or process.stdout is None or process.stderr is None:
            raise ValueError("ProcessStream needs stdin, stdout and stderr pipes")
        self._process = process
        self._describe = describe
        self._lost_hint = lost_hint
        self._buffer = bytearray()
        self._stalled = False  # a read timed out: the process is not answering
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL_LINES)
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, name=f"stderr:{describe}", daemon=True
        )
        self._stderr_thread.start()
        self._selector = selectors.DefaultSelector()
        self._selector.register(process.stdout, selectors.EVENT_READ)

    def _drain_stderr(self) -> None:
        assert self._process.stderr is not None
        for raw in iter(self._process.stderr.readline, b""):
            self._stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _lost(self, what: str) -> TransportLost:
        code = self._process.poll()
        status = "still running" if code is None else f"exit code {code}"
        hint = self._lost_hint() if self._lost_hint else ""
        tail = self.stderr_tail()
        detail = f"; its stderr ends with:\n{tail}" if tail else ""
        return TransportLost(f"{self._describe}: {what} ({status}){hint}{detail}")

    def write(self, data: bytes) -> None:
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(data)
            self._process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise self._lost(f"writing failed: {exc}") from None

    def read_exact(self, size: int, timeout: float) -> bytes:
        assert self._process.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self._process.stdout.fileno()
        while len(self._buffer) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._stalled = True
                raise TransportTimeout(
                    f"{self._describe}: no answer within {timeout:.1f} s "
                    f"(got {len(self._buffer)} of {size} bytes)"
                )
            if not self._selector.select(remaining):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self._process.wait(timeout=5)
                self._stderr_thread.join(timeout=1)
                raise self._lost("the process closed its output")
            self._buffer += chunk
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    @property
    def pid(self) -> int:
        return self._process.pid

    def close(self) -> None:
        """End the process: its stdin is closed and it gets 5 s to exit, then SIGKILL.

        A process that let a read time out gets no grace period (it would only be
        waited out).
        """
        if self._process.poll() is None:
            try:
                assert self._process.stdin is not None
                self._process.stdin.close()
            except OSError:
                pass
            try:
                self._process.wait(timeout=0 if self._stalled else 5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._selector.close()
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()
