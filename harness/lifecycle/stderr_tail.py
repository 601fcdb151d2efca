"""What a program the harness runs wrote to stderr, kept as a bounded tail of lines.

A local child (:class:`~harness.lifecycle.process.ManagedProcess`) and a remote process
over SSH (:class:`~harness.transport.ssh.exec_stream.SshStream`) both have their stderr read
by a :class:`StderrTail`: a thread of its own drains it (so the program never blocks on
a full pipe), keeps the last lines for error messages and lets callers wait for a line.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import IO

TAIL_LINES = 40  # what stderr_tail() shows
MAX_LINE_BYTES = 8192  # a longer line without a newline keeps only its end


class StderrTail:
    """Reads ``read()`` (the next bytes; ``b""`` at the end, :class:`TimeoutError` when
    nothing came yet) until the end, in a daemon thread started on construction.

    ``keep_lines`` bounds how many lines :meth:`count` and :meth:`wait_for` see; ``log``,
    if given, gets every byte read.
    """

    def __init__(
        self,
        read: Callable[[], bytes],
        *,
        name: str,
        keep_lines: int = TAIL_LINES,
        log: IO[bytes] | None = None,
    ) -> None:
        self._read = read
        self._log = log
        self._lines: collections.deque[str] = collections.deque(maxlen=max(keep_lines, 1))
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._partial = b""
        self._ended = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._drain, name=f"stderr:{name}", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while True:
                try:
                    chunk = self._read()
                except TimeoutError:
                    continue  # the source's timeout belongs to another reader; keep waiting
                except (OSError, ValueError):
                    return  # the source was closed under the reader: its end
                if not chunk:
                    return
                if self._log is not None:
                    self._log.write(chunk)
                    self._log.flush()
                *lines, partial = (self._partial + chunk).split(b"\n")
                self._partial = partial[-MAX_LINE_BYTES:]
                self._add(lines)
        finally:
            self._add([self._partial] if self._partial else [])
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def _add(self, raw_lines: list[bytes]) -> None:
        lines = [raw.decode("utf-8", "replace").rstrip("\r") for raw in raw_lines]
        with self._changed:
            self._lines.extend(lines)
            self._tail.extend(lines)
            self._changed.notify_all()

    def text(self) -> str:
        """The last :data:`TAIL_LINES` lines."""
        with self._changed:
            return "\n".join(self._tail)

    def count(self, text: str) -> int:
        """How many kept lines contain ``text``."""
        with self._changed:
            return sum(text in line for line in self._lines)

    def wait_for(self, text: str, count: int, timeout: float) -> bool:
        """Whether ``count`` lines containing ``text`` arrived within ``timeout``; False as
        soon as the stream ended without them."""
        with self._changed:
            self._changed.wait_for(lambda: self._ended or self.count(text) >= count, timeout)
            return self.count(text) >= count

    def wait_for_end(self, timeout: float) -> bool:
        """Whether the stream has ended within ``timeout``."""
        with self._changed:
            return self._changed.wait_for(lambda: self._ended, timeout)

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the reading thread to finish."""
        self._thread.join(timeout)
