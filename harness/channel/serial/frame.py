"""Serial frames (docs/serial-protocol.md): COBS-encoded, 0x00-delimited, CRC-32 protected.

A frame is the unit the serial link (:mod:`harness.channel.serial.arq`) numbers,
acknowledges and resends; a wire message travels in one or more DATA frames.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

from cobs import cobs

from harness.errors import InfrastructureError

FRAME_HEADER = 3  # kind, seq, flags
FRAME_CRC = 4
FLAG_START = 0x01
FLAG_END = 0x02
_U32 = struct.Struct("<I")


class FrameKind(enum.IntEnum):
    """The first byte of a decoded frame."""

    DATA = 1
    ACK = 2
    NAK = 3
    HELLO = 4
    HELLO_REQUEST = 5
    EXIT = 6


class FrameError(ValueError, InfrastructureError):
    """Bytes between two delimiters that are not a valid frame."""


@dataclass(frozen=True)
class Frame:
    """One decoded frame."""

    kind: int
    seq: int
    flags: int = 0
    payload: bytes = b""

    def encode(self) -> bytes:
        """COBS bytes of the frame with its CRC, followed by the 0x00 delimiter."""
        packet = bytes((self.kind, self.seq & 0xFF, self.flags)) + self.payload
        return cobs.encode(packet + _U32.pack(zlib.crc32(packet))) + b"\0"


def decode_frame(encoded: bytes) -> Frame:
    """The frame in ``encoded`` (delimiter removed); :class:`FrameError` if invalid."""
    try:
        packet = cobs.decode(encoded)
    except cobs.DecodeError as exc:
        raise FrameError(f"not COBS: {exc}") from None
    if len(packet) < FRAME_HEADER + FRAME_CRC:
        raise FrameError(f"{len(packet)} bytes, shorter than a frame's header and CRC")
    (crc,) = _U32.unpack_from(packet, len(packet) - FRAME_CRC)
    if crc != zlib.crc32(packet[:-FRAME_CRC]):
        raise FrameError("CRC mismatch")
    return Frame(packet[0], packet[1], packet[2], bytes(packet[FRAME_HEADER:-FRAME_CRC]))
