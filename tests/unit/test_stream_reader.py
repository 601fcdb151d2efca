"""The Python stream reader's edges, beside the committed stream vectors
(tests/system/test_stream_vectors.py): how many bytes it asks for in each state, the whole
refusal when the input ends, skipping a refused message of the smallest and the
largest length whole."""

from __future__ import annotations

import struct

import pytest

from harness.codec import wire
from harness.codec.wire import MAX_MESSAGE, MIN_MESSAGE, MessageType, WireErrorCode
from harness.codec.wire.stream_reader import StreamMessage, StreamReader, StreamRefusal
from harness.data.messages import Action, Request

MESSAGE = wire.encode_request(Request(Action.HELLO, seq=7))


def with_length(length: int, frame: bytes = MESSAGE) -> bytes:
    """``frame``'s header with another length field and a version no reader speaks."""
    return (
        frame[:4]
        + bytes([wire.WIRE_VERSION + 1])
        + frame[5:8]
        + struct.pack("<I", length)
        + frame[12:16]
    )


def test_the_smallest_limit_is_the_smallest_message() -> None:
    StreamReader(MessageType.REQUEST, MIN_MESSAGE)
    with pytest.raises(ValueError, match=r"^max_message must be 21\.\.1048576; got 20$"):
        StreamReader(MessageType.REQUEST, MIN_MESSAGE - 1)


def test_wanted_counts_what_is_missing_in_each_state() -> None:
    reader = StreamReader(MessageType.REQUEST)
    assert reader.wanted() == 16
    assert reader.feed(MESSAGE[:5]) == []
    assert reader.wanted() == 11
    assert reader.feed(MESSAGE[5:20]) == []
    assert reader.wanted() == len(MESSAGE) - 20
    assert reader.feed(MESSAGE[20:]) == [StreamMessage(0, MESSAGE)]
    refused = with_length(40)
    assert [type(u) for u in reader.feed(refused)] == [StreamRefusal]
    assert reader.wanted() == 40 - 16
    assert reader.feed(bytes(4)) == []
    assert reader.wanted() == 20
    reader.feed(bytes(20))
    assert reader.feed(b"ETBX" + bytes(12)) != []  # a bad magic: the reader resynchronises
    assert reader.wanted() == 1


def test_the_input_ending_in_a_header_or_a_message_is_refused_whole() -> None:
    reader = StreamReader(MessageType.REQUEST)
    reader.feed(MESSAGE[:5])
    (header,) = reader.end()
    assert isinstance(header, StreamRefusal), header
    assert (header.offset, header.seq) == (0, 0)
    assert str(header.error) == "TRUNCATED at byte 5: the input ends 5 bytes into a 16-byte header"
    reader = StreamReader(MessageType.REQUEST)
    reader.feed(MESSAGE + MESSAGE[:20])
    (message,) = reader.end()
    assert isinstance(message, StreamRefusal), message
    assert (message.offset, message.seq) == (len(MESSAGE), 7)
    assert str(message.error) == (
        f"TRUNCATED at byte 20: the input ends after 20 of the {len(MESSAGE)} bytes the length "
        "field says"
    )
    assert reader.end() == []


@pytest.mark.parametrize("length", [MIN_MESSAGE, MAX_MESSAGE])
def test_a_refused_message_of_a_usable_length_is_skipped_whole(length: int) -> None:
    """A magic inside the skipped bytes is not looked at; past them, the next unit starts."""
    reader = StreamReader(MessageType.REQUEST, MIN_MESSAGE)
    (refusal,) = reader.feed(with_length(length))
    assert isinstance(refusal, StreamRefusal), refusal
    assert refusal.error.code is WireErrorCode.VERSION
    assert reader.feed(MESSAGE[: length - 16]) == []
    assert reader.wanted() == max(length - 16 - len(MESSAGE), 16)


def test_a_refused_header_of_an_unusable_length_resynchronises_at_the_next_magic() -> None:
    reader = StreamReader(MessageType.REQUEST)
    units = reader.feed(with_length(MAX_MESSAGE + 1) + MESSAGE)
    assert [type(u) for u in units] == [StreamRefusal, StreamMessage]
    assert units[1] == StreamMessage(16, MESSAGE)
