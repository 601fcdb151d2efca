"""Program upload messages, actions 9 PROGRAM_DATA and 10 PROGRAM_END (docs/wire-format.md,
"Program upload").

A device without a file system (MCU firmware built from an ExecuTorch source tree)
receives the program a LOAD runs as chunks: PROGRAM_DATA carries ``offset`` (u32),
``length`` (u16) and that many bytes, the first at offset 0 and each next one where
the previous ended; PROGRAM_END carries the program's ``size`` (u32) and CRC-32
(u32, the message CRC's algorithm). Their reports are ordinary reports.
"""

from __future__ import annotations

import struct
import zlib

from harness.codec.wire.format import _HEADER, HEADER_SIZE, MAGIC, WIRE_VERSION, MessageType, seal
from harness.data.messages import Action

MAX_CHUNK = 0xFFFF  # the u16 length; a device's max_message bounds it further
_DATA = struct.Struct("<IH")
_END = struct.Struct("<II")
_OVERHEAD = HEADER_SIZE + 1 + _DATA.size + 4  # header, action, offset and length, CRC


def chunk_limit(max_message: int) -> int:
    """The largest PROGRAM_DATA chunk a device announcing ``max_message`` accepts."""
    return max(0, min(MAX_CHUNK, max_message - _OVERHEAD))


def encode_program_data(seq: int, offset: int, chunk: bytes) -> bytes:
    """A PROGRAM_DATA request carrying ``chunk`` at ``offset``."""
    if len(chunk) > MAX_CHUNK:
        raise ValueError(f"a PROGRAM_DATA chunk holds at most {MAX_CHUNK} bytes; got {len(chunk)}")
    return _message(seq, Action.PROGRAM_DATA, _DATA.pack(offset, len(chunk)) + chunk)


def encode_program_end(seq: int, program: bytes) -> bytes:
    """The PROGRAM_END request that ends the upload of ``program``."""
    return _message(seq, Action.PROGRAM_END, _END.pack(len(program), zlib.crc32(program)))


def _message(seq: int, action: Action, body: bytes) -> bytes:
    buf = bytearray(HEADER_SIZE)
    buf += bytes((action,)) + body
    _HEADER.pack_into(buf, 0, MAGIC, WIRE_VERSION, MessageType.REQUEST, 0, len(buf) + 4, seq)
    return seal(buf)
