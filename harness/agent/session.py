"""An agent session: requests in, reports out, over one byte stream.

The device agent serves wire-format messages back to back on its stdin and
stdout (docs/wire-format.md). A session numbers each request and checks that the
report it reads back answers that request, so a report can never be attributed
to the wrong case. Each read waits at most the case timeout, and no longer than
the session's :class:`TimeLimit` (e.g. the run's ``--run-timeout``) allows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Protocol

from harness import wire
from harness.messages import Report, Request
from harness.transport.base import ByteStream, TransportError, TransportLost, TransportTimeout
from harness.wire_stream import StreamReader, StreamRefusal, StreamUnit


class AgentProtocolError(TransportError):
    """The agent answered with bytes that are not the report that was due."""


class AgentDidNotStart(TransportLost):
    """The agent process ended before its first report; the message says what to do."""


class TimeLimit(Protocol):
    """A limit beyond the case timeout, e.g. the run's deadline."""

    def bound(self, seconds: float) -> float:
        """``seconds``, or less if the limit is reached sooner."""
        ...

    def check(self) -> None:
        """Raise (an infrastructure error saying why) if the limit is reached."""
        ...


class AgentLink(Protocol):
    """Anything that carries requests to a device agent and brings reports back."""

    def request(self, request: Request) -> Report: ...

    def send_raw(self, frame: bytes, seq: int) -> Report: ...

    def close(self) -> None: ...


class AgentSession:
    """Requests and reports over a :class:`ByteStream` to a running agent process."""

    def __init__(self, stream: ByteStream, *, timeout: float, name: str = "agent",
                 time_limit: TimeLimit | None = None, start_hint: str = "") -> None:
        """``start_hint`` is added to the error if the agent ends before its first report."""
        self._stream = stream
        self._timeout = timeout
        self._name = name
        self._time_limit = time_limit
        self._seq = itertools.count(1)
        self._start_hint = start_hint
        self._answered = False

    @property
    def stream(self) -> ByteStream:
        return self._stream

    def next_seq(self) -> int:
        """A fresh sequence number, for frames built by hand."""
        return next(self._seq)

    def request(self, request: Request) -> Report:
        """Send ``request`` (numbered afresh) and return the device's report."""
        numbered = dataclasses.replace(request, seq=self.next_seq())
        return self.send_raw(wire.encode_request(numbered), numbered.seq)

    def pipeline(self, requests: Sequence[Request], window: int = 8) -> list[Report]:
        """Send ``requests`` keeping up to ``window`` in flight; reports in request order.

        The agent serves requests strictly in order, so several may travel at once:
        on a link with latency this hides the round trip.
        """
        numbered = [dataclasses.replace(r, seq=self.next_seq()) for r in requests]
        reports: list[Report] = []
        sent = 0
        with self._first_contact():
            while len(reports) < len(numbered):
                while sent < len(numbered) and sent - len(reports) < window:
                    self._stream.write(wire.encode_request(numbered[sent]))
                    sent += 1
                reports.append(self._read_report(numbered[len(reports)].seq))
        return reports

    def send_raw(self, frame: bytes, seq: int) -> Report:
        """Send arbitrary bytes (e.g. a deliberately malformed frame); read the report.

        ``seq`` is the sequence number the report must echo.
        """
        with self._first_contact():
            self._stream.write(frame)
            return self._read_report(seq)

    def exchange(self, frame: bytes) -> bytes:
        """Send one frame and return the next report's bytes, undecoded: the device's
        whole part of a case (the benchmark times exactly this)."""
        with self._first_contact():
            self._stream.write(frame)
            return self._read_report_bytes()

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
            return self._stream.read_exact(size, timeout)
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
        if isinstance(unit, StreamRefusal):
            raise self._unreadable(unit.error)
        return unit.data

    def _unreadable(self, exc: wire.WireError) -> AgentProtocolError:
        return AgentProtocolError(
            f"{self._name}: unreadable report ({exc}); agent stderr:\n"
            f"{self._stream.stderr_tail()}"
        )

    def _read_report(self, seq: int) -> Report:
        """The next report, which must answer request ``seq``."""
        return self.decode(self._read_report_bytes(), seq)

    def decode(self, data: bytes, seq: int) -> Report:
        """The report in ``data`` (as :meth:`exchange` returns it), which must answer ``seq``."""
        try:
            report = wire.decode_report(data)
        except wire.WireError as exc:
            raise self._unreadable(exc) from None
        if report.seq != seq:
            raise AgentProtocolError(
                f"{self._name}: expected the report for request #{seq}, got one for #{report.seq}"
            )
        return report

    def close(self) -> None:
        self._stream.close()
