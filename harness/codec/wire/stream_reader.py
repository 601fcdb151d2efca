"""Stream reading (docs/wire-format.md, "Stream reading"): a byte stream cut into units.

Messages on a pipe, an SSH channel or an ADB shell follow each other with nothing in
between. :class:`StreamReader` cuts such a stream into the units the specification
defines, each of which gets exactly one report: a message whose header is valid
(:class:`StreamMessage`, still to be decoded), or bytes refused by their header or by
the end of the input (:class:`StreamRefusal`). It does no I/O: the caller feeds it
bytes as they arrive, at most :meth:`StreamReader.wanted` at a time if it must never
read past a message (a host waiting for a report), and gets each unit as soon as the
bytes that decide it are at hand.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from harness.codec.wire import (
    HEADER_SIZE,
    MAGIC,
    MAX_MESSAGE,
    MIN_MESSAGE,
    MessageType,
    WireError,
    WireErrorCode,
    peek_header,
)

_U32 = struct.Struct("<I")
_LENGTH_OFFSET = 8
_SEQ_OFFSET = 12


@dataclass(frozen=True)
class StreamMessage:
    """A unit whose 16-byte header is valid: one whole message, not yet decoded."""

    offset: int  # where the unit starts in the stream
    data: bytes


@dataclass(frozen=True)
class StreamRefusal:
    """A unit refused by its header, or cut short by the end of the input.

    A device answers it with a REJECTED report: detail ``error.code``, ``seq`` echoed.
    """

    offset: int
    seq: int  # bytes 12..15 of the unit's first 16; 0 if the input ended sooner
    error: WireError


StreamUnit = StreamMessage | StreamRefusal


class _State(enum.Enum):
    HEADER = "waiting for the 16 bytes that start a unit"
    MESSAGE = "reading a message whose header is valid"
    SKIP = "discarding the rest of a refused message of usable length"
    RESYNC = "discarding bytes up to the next magic"


# Module-level names: looking a member up on an enum class is slow, and a host reads
# every report through here.
_HEADER, _MESSAGE, _SKIP, _RESYNC = _State.HEADER, _State.MESSAGE, _State.SKIP, _State.RESYNC


class StreamReader:
    """Cuts a byte stream into units, for a reader that expects ``expect`` messages.

    ``max_message`` is the reader's own limit (step 3 of "Decoding"); a refused
    message of length up to ``MAX_MESSAGE`` is still skipped whole.
    """

    def __init__(self, expect: MessageType, max_message: int = MAX_MESSAGE) -> None:
        if not MIN_MESSAGE <= max_message <= MAX_MESSAGE:
            raise ValueError(f"max_message must be {MIN_MESSAGE}..{MAX_MESSAGE}; got {max_message}")
        self._expect = expect
        self._max_message = max_message
        self._buffer = bytearray()
        self._start = 0  # stream offset of the current unit
        self._position = 0  # stream offset of self._buffer[0]
        self._state = _HEADER
        self._count = 0  # MESSAGE: the unit's length; SKIP: bytes still to discard

    def wanted(self) -> int:
        """Bytes the reader certainly consumes before it can move on: at least 1."""
        if self._state is _HEADER:
            return HEADER_SIZE - len(self._buffer)
        if self._state is _MESSAGE:
            return self._count - len(self._buffer)
        if self._state is _SKIP:
            return self._count
        return 1

    def feed(self, data: bytes) -> list[StreamUnit]:
        """Take the next bytes of the stream; return the units they completed or refused."""
        self._buffer += data
        units: list[StreamUnit] = []
        while self._step(units):
            pass
        return units

    def end(self) -> list[StreamUnit]:
        """The input ended: the refusal of an unfinished unit that still needs an answer."""
        units: list[StreamUnit] = []
        if self._state is _HEADER and self._buffer:
            units.append(
                self._refuse(
                    WireError(
                        WireErrorCode.TRUNCATED,
                        len(self._buffer),
                        f"the input ends {len(self._buffer)} bytes into a "
                        f"{HEADER_SIZE}-byte header",
                    ),
                    seq=0,
                )
            )
        elif self._state is _MESSAGE:
            (seq,) = _U32.unpack_from(self._buffer, _SEQ_OFFSET)
            units.append(
                self._refuse(
                    WireError(
                        WireErrorCode.TRUNCATED,
                        len(self._buffer),
                        f"the input ends after {len(self._buffer)} of the {self._count} bytes "
                        "the length field says",
                    ),
                    seq=seq,
                )
            )
        self._drop(len(self._buffer))
        self._state = _HEADER
        return units

    def _step(self, units: list[StreamUnit]) -> bool:
        """Advance by one state change if the buffer allows it."""
        if self._state is _HEADER:
            if len(self._buffer) < HEADER_SIZE:
                return False
            self._judge_header(units)
        elif self._state is _MESSAGE:
            if len(self._buffer) < self._count:
                return False
            units.append(StreamMessage(self._start, bytes(self._buffer[: self._count])))
            self._drop(self._count)
            self._next_unit()
        elif self._state is _SKIP:
            discarded = min(self._count, len(self._buffer))
            self._drop(discarded)
            self._count -= discarded
            if self._count:
                return False
            self._next_unit()
        else:
            found = self._buffer.find(MAGIC)
            if found < 0:
                # Keep what may be the start of a magic.
                self._drop(len(self._buffer) - min(len(self._buffer), len(MAGIC) - 1))
                return False
            self._drop(found)
            self._next_unit()
        return True

    def _judge_header(self, units: list[StreamUnit]) -> None:
        try:
            header = peek_header(
                bytes(self._buffer[:HEADER_SIZE]), self._max_message, expect=self._expect
            )
        except WireError as exc:
            # Answered now, before any more of the unit is read.
            (seq,) = _U32.unpack_from(self._buffer, _SEQ_OFFSET)
            units.append(self._refuse(exc, seq))
            (length,) = _U32.unpack_from(self._buffer, _LENGTH_OFFSET)
            if exc.code is not WireErrorCode.BAD_MAGIC and MIN_MESSAGE <= length <= MAX_MESSAGE:
                self._drop(HEADER_SIZE)
                self._state, self._count = _SKIP, length - HEADER_SIZE
            else:
                self._drop(1)  # the next magic is searched from the unit's second byte on
                self._state = _RESYNC
            return
        self._state, self._count = _MESSAGE, header.length

    def _refuse(self, error: WireError, seq: int) -> StreamRefusal:
        return StreamRefusal(self._start, seq, error)

    def _drop(self, size: int) -> None:
        del self._buffer[:size]
        self._position += size

    def _next_unit(self) -> None:
        self._state = _HEADER
        self._start = self._position
