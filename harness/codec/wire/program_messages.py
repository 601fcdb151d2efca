"""Program upload messages, actions 9 PROGRAM_DATA and 10 PROGRAM_END (docs/wire-format.md,
"Program upload").

A device without a file system (MCU firmware built from an ExecuTorch source tree)
receives the program a LOAD runs as chunks: PROGRAM_DATA carries ``offset`` (u32),
``length`` (u16) and that many bytes, the first at offset 0 and each next one where
the previous ended; PROGRAM_END carries the program's ``size`` (u32) and CRC-32
(u32, the message CRC's algorithm). Their reports are ordinary reports.

They are actions of wire-format version 2 with bodies of their own: :func:`decode_upload`
reads them (a device that serves uploads), while :func:`~harness.codec.wire.decode_request`
is the decoder of a device without uploads and refuses them ``ACTION``.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from harness.codec.wire.decode import _open_frame
from harness.codec.wire.format import (
    _HEADER,
    _U8,
    _U16,
    _U32,
    HEADER_SIZE,
    MAGIC,
    WIRE_VERSION,
    MessageType,
    WireErrorCode,
    _Limit,
    seal,
)
from harness.data.messages import Action

MAX_CHUNK = 0xFFFF  # the u16 length; a device's max_message bounds it further
_DATA = struct.Struct("<IH")
_END = struct.Struct("<II")
_OVERHEAD = HEADER_SIZE + 1 + _DATA.size + 4  # header, action, offset and length, CRC
_UPLOAD_ACTIONS = _Limit(WireErrorCode.ACTION, Action.PROGRAM_END, Action.PROGRAM_DATA)


@dataclass(frozen=True)
class ProgramData:
    """A PROGRAM_DATA request: ``data`` goes at ``offset`` of the program under way."""

    offset: int
    data: bytes
    seq: int = 0


@dataclass(frozen=True)
class ProgramEnd:
    """A PROGRAM_END request: the program uploaded is ``size`` bytes of CRC-32 ``crc``."""

    size: int
    crc: int
    seq: int = 0


ProgramUpload = ProgramData | ProgramEnd


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
    return encode_upload(ProgramEnd(len(program), zlib.crc32(program), seq))


def encode_upload(message: ProgramUpload) -> bytes:
    """The bytes of a PROGRAM_DATA or PROGRAM_END request."""
    if isinstance(message, ProgramData):
        return encode_program_data(message.seq, message.offset, message.data)
    return _message(message.seq, Action.PROGRAM_END, _END.pack(message.size, message.crc))


def decode_upload(data: bytes) -> ProgramUpload:
    """Decode one whole PROGRAM_DATA or PROGRAM_END request; raises
    :class:`~harness.codec.wire.WireError` (``ACTION`` for any other action)."""
    header, reader = _open_frame(data, MessageType.REQUEST)
    action = reader.bounded(_U8, _UPLOAD_ACTIONS, "upload action")
    message: ProgramUpload
    if action == Action.PROGRAM_DATA:
        offset = reader.number(_U32, "PROGRAM_DATA offset")
        length = reader.number(_U16, "PROGRAM_DATA length")
        message = ProgramData(offset, reader.raw(length, "PROGRAM_DATA bytes"), header.seq)
    else:
        size = reader.number(_U32, "PROGRAM_END size")
        message = ProgramEnd(size, reader.number(_U32, "PROGRAM_END crc"), header.seq)
    reader.finish()
    return message


def _message(seq: int, action: Action, body: bytes) -> bytes:
    buf = bytearray(HEADER_SIZE)
    buf += bytes((action,)) + body
    _HEADER.pack_into(buf, 0, MAGIC, WIRE_VERSION, MessageType.REQUEST, 0, len(buf) + 4, seq)
    return seal(buf)
