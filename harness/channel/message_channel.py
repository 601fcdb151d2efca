"""What every channel to a device agent offers the agent session."""

from __future__ import annotations

import abc
import struct
from collections.abc import Sequence
from typing import Protocol

from harness.codec import wire
from harness.transport.base import TransportError

_SEQ = struct.Struct("<I")
_SEQ_OFFSET = 12  # the header's sequence number (docs/wire-format.md)


class AgentProtocolError(TransportError):
    """The agent answered with bytes that are not the report that was due."""


class TimeLimit(Protocol):
    """A limit beyond the case timeout, e.g. the run's deadline."""

    def bound(self, seconds: float) -> float:
        """``seconds``, or less if the limit is reached sooner."""
        ...

    def check(self) -> None:
        """Raise (an infrastructure error saying why) if the limit is reached."""
        ...


AGENT_REBUILD = (
    "rebuild the agent from this checkout: the harness rebuilds its own agent builds when "
    "their sources change, so this is an agent.prebuilt one; build it again as docs/agent.md "
    "says (cmake -S agent/runtime -B build/agent ... && cmake --build build/agent && "
    "cmake --install build/agent --prefix DIST)"
)
FIRMWARE_REBUILD = (
    "rebuild the firmware from this checkout and flash it (make -C agent/mcu BOARD=BOARD "
    "EXECUTORCH_INCLUDE=SDK_INCLUDE EXECUTORCH_VERSION=VERSION, docs/mcu.md); an emulated "
    "board's firmware the harness rebuilds itself"
)


def version_mismatch(name: str, part: str, found: int, rebuild: str) -> str:
    """What to do when ``part`` (``agent`` or ``firmware``) speaks wire-format version
    ``found``: ``rebuild`` it if it is older than this harness, else update the harness."""
    advice = (
        rebuild
        if found < wire.WIRE_VERSION
        else f"update the harness to one that speaks version {found}"
    )
    return (
        f"{name}: the {part} speaks wire-format version {found}, this harness version "
        f"{wire.WIRE_VERSION}: {advice}"
    )


def header_seq(message: bytes) -> int:
    """The sequence number in a wire message's header; 0 if it is shorter than one."""
    return _SEQ.unpack_from(message, _SEQ_OFFSET)[0] if len(message) >= wire.HEADER_SIZE else 0


class MessageChannel(abc.ABC):
    """Carries whole wire messages to one running agent and its reports back.

    Every failure is a :class:`~harness.transport.base.TransportError` within bounded
    time. One exchange at a time: a channel is not thread-safe.
    """

    @abc.abstractmethod
    def exchange(self, message: bytes, seq: int, what: str = "message") -> bytes:
        """Send ``message`` and return the bytes of the report that answers ``seq``
        (the next report, on a channel that cannot lose one). ``what`` names the
        message in errors (e.g. ``LOAD``)."""

    def pipeline(self, messages: Sequence[tuple[bytes, int]], window: int) -> list[bytes]:
        """Exchange each ``(message, seq)`` keeping up to ``window`` in flight, if the
        channel can (one by one otherwise); reports in message order."""
        return [self.exchange(message, seq) for message, seq in messages]

    def stderr_tail(self) -> str:
        """The last lines the agent wrote to stderr, where there is one (a process)."""
        return ""

    @abc.abstractmethod
    def close(self) -> None:
        """End the agent's channel; safe to call twice."""
