"""An agent session: requests in, reports out, over any channel to a running agent.

A session numbers each request and checks that the report it reads back answers
that request, so a report can never be attributed to the wrong case. The channel
(:mod:`harness.channel`) carries the whole messages: a process's byte stream, or a
serial link to an MCU whose firmware is the agent.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Protocol

from harness.channel.message_channel import (
    AgentProtocolError,
    MessageChannel,
    TimeLimit,
    header_seq,
)
from harness.codec import wire
from harness.data.messages import Report, Request
from harness.transport.base import TransportError

__all__ = ["AgentProtocolError", "AgentSession", "Session", "SessionBroken", "TimeLimit"]


class SessionBroken(TransportError):
    """The agent's session failed earlier (lost, timed out, out of step): nothing was sent.

    Raised at once for every request after the first failure, so that a test that
    goes on asking (e.g. Hypothesis, generating and shrinking examples) ends in
    moments instead of waiting out a timeout per request. Its cause is the error
    that broke the session. :meth:`harness.runner.CaseRunner.restart` starts a fresh agent.
    """


class Session(Protocol):
    """What the harness uses of a session to a device agent (an :class:`AgentSession`)."""

    def next_seq(self) -> int: ...

    def request(self, request: Request) -> Report: ...

    def pipeline(self, requests: Sequence[Request], window: int = 8) -> list[Report]: ...

    def send_raw(self, frame: bytes, seq: int | None = None) -> Report: ...

    def exchange(self, frame: bytes) -> bytes: ...

    def decode(self, data: bytes, seq: int) -> Report: ...

    def stderr_tail(self) -> str: ...

    def close(self) -> None: ...


class AgentSession:
    """Requests and reports over one :class:`~harness.channel.message_channel.MessageChannel`."""

    def __init__(self, channel: MessageChannel, *, name: str = "agent") -> None:
        self.channel = channel
        self._name = name
        self._seq = itertools.count(1)

    def next_seq(self) -> int:
        """A fresh sequence number, for messages built by hand."""
        return next(self._seq)

    def request(self, request: Request) -> Report:
        """Send ``request`` (numbered afresh) and return the device's report."""
        numbered = dataclasses.replace(request, seq=self.next_seq())
        data = self.channel.exchange(
            wire.encode_request(numbered), numbered.seq, numbered.action.name
        )
        return self.decode(data, numbered.seq)

    def pipeline(self, requests: Sequence[Request], window: int = 8) -> list[Report]:
        """Send ``requests`` keeping up to ``window`` in flight where the channel can;
        reports in request order."""
        numbered = [dataclasses.replace(r, seq=self.next_seq()) for r in requests]
        sent = [(wire.encode_request(r), r.seq) for r in numbered]
        replies = self.channel.pipeline(sent, window)
        return [self.decode(data, r.seq) for data, r in zip(replies, numbered, strict=True)]

    def send_raw(self, frame: bytes, seq: int | None = None) -> Report:
        """Send arbitrary message bytes (e.g. a deliberately malformed request); read the
        report, which must echo ``seq`` (by default the one in ``frame``'s header, as
        the device echoes it; 0 if ``frame`` is shorter than a header)."""
        seq = header_seq(frame) if seq is None else seq
        return self.decode(self.channel.exchange(bytes(frame), seq, "raw message"), seq)

    def exchange(self, frame: bytes) -> bytes:
        """Send one message and return the report's bytes, undecoded: the device's
        whole part of a case (the benchmark times exactly this)."""
        return self.channel.exchange(frame, header_seq(frame))

    def decode(self, data: bytes, seq: int) -> Report:
        """The report in ``data`` (as :meth:`exchange` returns it), which must answer ``seq``."""
        try:
            report = wire.decode_report(data)
        except wire.WireError as exc:
            raise AgentProtocolError(
                f"{self._name}: unreadable report ({exc}); agent stderr:\n"
                f"{self.channel.stderr_tail()}"
            ) from None
        if report.seq != seq:
            raise AgentProtocolError(
                f"{self._name}: expected the report for request #{seq}, got one for #{report.seq}"
            )
        return report

    def stderr_tail(self) -> str:
        """The last lines the agent wrote to stderr (none from firmware)."""
        return self.channel.stderr_tail()

    def close(self) -> None:
        self.channel.close()
