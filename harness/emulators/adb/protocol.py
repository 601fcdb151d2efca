"""The ADB wire protocol: 24-byte message headers, commands and their payloads.

Every message is a header of six little-endian ``u32`` (command, arg0, arg1, payload
length, payload checksum, command XOR 0xFFFFFFFF) followed by the payload.
"""

from __future__ import annotations

import asyncio
import enum
import struct
from dataclasses import dataclass

from harness.errors import InfrastructureError

ADB_VERSION = 0x01000001  # also the first version that skips payload checksums
MAX_PAYLOAD = 1024 * 1024  # what the device accepts per message (as real adbd)
MAX_PAYLOAD_V1 = 4096  # for hosts older than ADB_VERSION

_HEADER = struct.Struct("<6I")
HEADER_SIZE = _HEADER.size


class Command(enum.IntEnum):
    """Message commands, as the ASCII of their names read little-endian."""

    CNXN = 0x4E584E43
    AUTH = 0x48545541
    OPEN = 0x4E45504F
    OKAY = 0x59414B4F
    CLSE = 0x45534C43
    WRTE = 0x45545257
    STLS = 0x534C5453


class AuthType(enum.IntEnum):
    """``arg0`` of an AUTH message."""

    TOKEN = 1
    SIGNATURE = 2
    RSAPUBLICKEY = 3


class ProtocolError(InfrastructureError):
    """The host sent something that is not valid ADB; the connection is dropped."""


@dataclass(frozen=True)
class Message:
    """One ADB message."""

    command: Command
    arg0: int
    arg1: int
    payload: bytes = b""

    def encode(self, *, with_checksum: bool) -> bytes:
        """Header and payload; the checksum is the byte sum for pre-1.0.0.1 hosts."""
        checksum = sum(self.payload) & 0xFFFFFFFF if with_checksum else 0
        header = _HEADER.pack(
            self.command,
            self.arg0,
            self.arg1,
            len(self.payload),
            checksum,
            self.command ^ 0xFFFFFFFF,
        )
        return header + self.payload


async def read_message(reader: asyncio.StreamReader, max_payload: int) -> Message:
    """Read one message; :class:`ProtocolError` on a bad header, EOF as IncompleteReadError."""
    header = await reader.readexactly(HEADER_SIZE)
    command, arg0, arg1, length, _checksum, magic = _HEADER.unpack(header)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic 0x{magic:08x} for command 0x{command:08x}")
    try:
        known = Command(command)
    except ValueError:
        raise ProtocolError(f"unknown command 0x{command:08x}") from None
    if length > max_payload:
        raise ProtocolError(f"{known.name} payload of {length} bytes exceeds {max_payload}")
    payload = await reader.readexactly(length) if length else b""
    return Message(known, arg0, arg1, payload)
