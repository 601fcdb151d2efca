"""A :class:`ByteStream` over a local child process's stdin and stdout.

Used by the host transport directly, and by transports whose client is a local
program (``adb shell``, ``ssh``) that relays the remote process's streams. The
child is a :class:`~harness.lifecycle.process.ManagedProcess`: its stderr is kept
as a bounded tail, and it ends with the harness however the harness ends.
"""

from __future__ import annotations

import os
import selectors
import subprocess
from collections.abc import Callable, Mapping, Sequence

from harness.lifecycle.process import PIPE, ManagedProcess
from harness.transport.buffered_stream import CHUNK, BufferedStream

_CLOSE_GRACE = 5.0  # seconds a child may take to exit after its stdin is closed
_SETTLE_S = 5.0  # for a lost child's exit, then its stderr's end (1 s was short under load)


def start_stream_process(
    argv: Sequence[str], *, name: str, env: Mapping[str, str] | None = None
) -> ManagedProcess:
    """``argv`` with its stdin, stdout and stderr on pipes, as :class:`ProcessStream` needs."""
    return ManagedProcess(argv, name=name, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=env)


class ProcessStream(BufferedStream):
    """Talks to ``process`` through its pipes (see :func:`start_stream_process`)."""

    def __init__(
        self, process: ManagedProcess, describe: str, lost_hint: Callable[[], str] | None = None
    ) -> None:
        popen = process.popen
        if popen.stdin is None or popen.stdout is None or popen.stderr is None:
            raise ValueError("ProcessStream needs stdin, stdout and stderr pipes")
        super().__init__(describe, end_of_output="the process closed its output")
        self._child = process
        self._process = popen
        self._lost_hint = lost_hint
        self._selector = selectors.DefaultSelector()
        self._selector.register(popen.stdout, selectors.EVENT_READ)

    def _state(self) -> str:
        code = self._process.poll()
        status = "still running" if code is None else f"exit code {code}"
        hint = self._lost_hint() if self._lost_hint else ""
        return f" ({status}){hint}"

    def write(self, data: bytes) -> None:
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(data)
            self._process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise self._lost(f"writing failed: {exc}") from None

    def _receive(self, timeout: float) -> bytes | None:
        assert self._process.stdout is not None
        if not self._selector.select(timeout):
            return None
        chunk = os.read(self._process.stdout.fileno(), CHUNK)
        if not chunk:
            self._settle()
        return chunk

    def _settle(self) -> None:
        """The process ended or is ending: wait for it, then for its stderr's end, so that
        the tail is complete (each bounded: a child that keeps stderr open costs seconds)."""
        try:
            self._process.wait(timeout=_SETTLE_S)
        except subprocess.TimeoutExpired:
            return
        self._child.wait_for_stderr_end(timeout=_SETTLE_S)

    def stderr_tail(self) -> str:
        return self._child.stderr_tail()

    @property
    def pid(self) -> int:
        return self._process.pid

    def close(self) -> None:
        """End the process: its stdin is closed and it gets a grace period to exit, then
        SIGKILL. A process that let a read time out gets no grace (it would only be
        waited out).
        """
        if self._process.poll() is None:
            try:
                assert self._process.stdin is not None
                self._process.stdin.close()
            except OSError:
                pass
        self._child.stop(0 if self._stalled else _CLOSE_GRACE, terminate=False)
        self._selector.close()
