"""A channel over a byte stream: an agent process's stdin and stdout.

The agent serves wire-format messages back to back (docs/wire-format.md); each
report's length comes from its header. Each read waits at most the case timeout,
and no longer than the channel's :class:`~harness.channel.message_channel.TimeLimit` (e.g. the
run's ``--run-timeout``) allows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from harness.channel.message_channel import (
    AGENT_REBUILD,
    AgentProtocolError,
    MessageChannel,
    TimeLimit,
    version_mismatch,
)
from harness.codec import wire
from harness.codec.wire.stream_reader import StreamReader, StreamRefusal, StreamUnit
from harness.transport.base import ByteStream, TransportLost, TransportTimeout


class AgentDidNotStart(TransportLost):
    """The agent process ended before its first report; the message says what to do."""


class StreamChannel(MessageChannel):
    """Wire messages over a :class:`ByteStream` to a running agent process."""

    def __init__(
        self,
        stream: ByteStream,
        *,
        timeout: float,
        name: str = "agent",
        time_limit: TimeLimit | None = None,
        start_hint: str = "",
    ) -> None:
        """``start_hint`` is added to the error if the agent ends before its first report."""
        self.stream = stream
        self._timeout = timeout
        self._name = name
        self._time_limit = time_limit
        self._start_hint = start_hint
        self._answered = False

    def exchange(self, message: bytes, seq: int, what: str = "message") -> bytes:
        """Write ``message``; the next report's bytes (a stream loses none, so the
        session checks that it answers ``seq``)."""
        with self._first_contact():
            self.stream.write(message)
            return self._read_report_bytes()

    def pipeline(self, messages: Sequence[tuple[bytes, int]], window: int) -> list[bytes]:
        """The agent serves requests strictly in order, so several may travel at once:
        on a link with latency this hides the round trip."""
        reports: list[bytes] = []
        sent = 0
        with self._first_contact():
            while len(reports) < len(messages):
                while sent < len(messages) and sent - len(reports) < window:
                    self.stream.write(messages[sent][0])
                    sent += 1
                reports.append(self._read_report_bytes())
        return reports

    def stderr_tail(self) -> str:
        return self.stream.stderr_tail()

    def close(self) -> None:
        self.stream.close()

    @contextlib.contextmanager
    def _first_contact(self) -> Iterator[None]:
        """Until the agent has answered once, a lost link carries the start hint."""
        try:
            yield
        except TransportLost as exc:
            if self._answered or not self._start_hint:
                raise
            raise AgentDidNotStart(f"{exc}\n{self._start_hint}") from exc

    def _read_exact(self, size: int) -> bytes:
        """``size`` bytes within the case timeout, cut short by the time limit."""
        limit = self._time_limit
        timeout = self._timeout if limit is None else limit.bound(self._timeout)
        try:
            return self.stream.read_exact(size, timeout)
        except TransportTimeout:
            if limit is not None:
                limit.check()  # the limit, not the device, ended the wait: say so
            raise

    def _read_report_bytes(self) -> bytes:
        # The spec's stream rules; a device sends only whole reports, so a refused
        # unit means the link is broken: no resynchronising.
        reader = StreamReader(wire.MessageType.REPORT)
        units: list[StreamUnit] = []
        while not units:
            units = reader.feed(self._read_exact(reader.wanted()))
        self._answered = True
        (unit,) = units  # the reader never gets more than one unit's bytes
        if isinstance(unit, StreamRefusal) and isinstance(unit.error, wire.WireVersionError):
            raise AgentProtocolError(
                version_mismatch(self._name, "agent", unit.error.found, AGENT_REBUILD)
            )
        if isinstance(unit, StreamRefusal):
            raise AgentProtocolError(
                f"{self._name}: unreadable report ({unit.error}); agent stderr:\n"
                f"{self.stream.stderr_tail()}"
            )
        return unit.data
