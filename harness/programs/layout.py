"""Where the parts of a program file lie, checked against the file as ExecuTorch's loader
checks them, and bounds-checked reads of its FlatBuffer.

The rules are upstream's (``schema/extended_header.cpp``, ``runtime/executor/program.cpp``
and the file data loader), applied before a program travels:

- ``Program::load`` first reads the file's first 64 bytes (``ExtendedHeader::kNumHeadBytes``):
  a shorter file does not load.
- ``eh00`` at byte 8 starts the extended header: its length (u32, at least 24), the
  FlatBuffer's size (``program_size``, u64), where the segments start
  (``segment_base_offset``, u64) and, in a header of 32 bytes or more, how many bytes they
  take (``segment_data_size``, u64). Without the header, the FlatBuffer is the whole file.
- The file holds what the header says: ``segment_base_offset + segment_data_size`` bytes
  when both are set, else ``program_size`` bytes; the FlatBuffer (``program_size`` bytes,
  at least 8) is read whole.
- Every segment (``segments[i]``: an offset from the segment base and a size) that the
  program uses (a delegate's blob, constant, mutable or named data) exists, lies within
  the file, and there is a segment base to find it from.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import UsageError

MIN_FILE_BYTES = 64  # ExtendedHeader::kNumHeadBytes: what Program::load reads first
_MAGIC = b"eh00"
_HEADER_AT = 8
_MIN_HEADER_LENGTH = 24  # magic, length, program_size, segment_base_offset
_LENGTH_WITH_DATA_SIZE = 32  # ... and segment_data_size
_MIN_FLATBUFFER_BYTES = 8  # root offset and identifier
_MAX_STRING_BYTES = 1024

_DAMAGED = "the file is damaged or not an ExecuTorch program (export it again)"
_CUT_SHORT = "the file is cut short or damaged: copy it whole, or export it again"


class ProgramError(ValueError, UsageError):
    """A file that is not a program the harness can load, with what to do."""


@dataclass(frozen=True)
class ExtendedHeader:
    """The ``eh00`` header: where the FlatBuffer ends and where the segments are."""

    program_size: int
    segment_base_offset: int
    segment_data_size: int


@dataclass(frozen=True)
class Segment:
    """One entry of the program's ``segments``: an offset from the segment base, a size."""

    offset: int
    size: int


def check_file_size(data: bytes, source: str) -> None:
    """Refuse a file shorter than the head ``Program::load`` reads first."""
    if len(data) < MIN_FILE_BYTES:
        raise ProgramError(
            f"{source}: {len(data)} bytes, but the runtime reads a program's first "
            f"{MIN_FILE_BYTES} bytes before anything else; {_CUT_SHORT}"
        )


def parse_extended_header(data: bytes, source: str) -> ExtendedHeader | None:
    """The extended header, checked against the file's size; None if there is none."""
    if data[_HEADER_AT : _HEADER_AT + 4] != _MAGIC:
        return None
    length = _u32(data, _HEADER_AT + 4)
    if length < _MIN_HEADER_LENGTH:
        raise ProgramError(
            f"{source}: the extended header (eh00) says it is {length} bytes long, at least "
            f"{_MIN_HEADER_LENGTH} are needed; {_DAMAGED}"
        )
    header = ExtendedHeader(
        program_size=_u64(data, _HEADER_AT + 8),
        segment_base_offset=_u64(data, _HEADER_AT + 16),
        segment_data_size=_u64(data, _HEADER_AT + 24) if length >= _LENGTH_WITH_DATA_SIZE else 0,
    )
    base, data_size = header.segment_base_offset, header.segment_data_size
    if base and data_size and base + data_size > len(data):
        raise ProgramError(
            f"{source}: the extended header (eh00) puts the segments at bytes {base} to "
            f"{base + data_size}, but the file has {len(data)} bytes; {_CUT_SHORT}"
        )
    if header.program_size > len(data):
        raise ProgramError(
            f"{source}: the extended header (eh00) says the program is "
            f"{header.program_size} bytes, but the file has {len(data)}; {_CUT_SHORT}"
        )
    if header.program_size < _MIN_FLATBUFFER_BYTES:
        raise ProgramError(
            f"{source}: the extended header (eh00) says the program is "
            f"{header.program_size} bytes, fewer than a FlatBuffer's {_MIN_FLATBUFFER_BYTES}; "
            f"{_DAMAGED}"
        )
    return header


def check_segments(
    data: bytes,
    header: ExtendedHeader | None,
    segments: Sequence[Segment],
    used: Sequence[tuple[str, int]],
    source: str,
) -> None:
    """Every segment the program uses (``used``: what uses it, its index) exists and lies
    within the file; every segment listed lies within it too."""
    base = header.segment_base_offset if header is not None else 0
    for what, index in used:
        if index >= len(segments):
            raise ProgramError(
                f"{source}: {what} is in segment {index}, but the program lists "
                f"{len(segments)} segments; {_DAMAGED}"
            )
        if base == 0:
            raise ProgramError(
                f"{source}: {what} is in segment {index}, but the program has no extended "
                f"header (eh00) giving where segments start; {_DAMAGED}"
            )
    if base == 0:
        return
    for index, segment in enumerate(segments):
        end = base + segment.offset + segment.size
        if end > len(data):
            raise ProgramError(
                f"{source}: segment {index} lies at bytes {base + segment.offset} to {end}, "
                f"but the file has {len(data)} bytes; {_CUT_SHORT}"
            )


def _u32(data: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", data, at)[0])


def _u64(data: bytes, at: int) -> int:
    return int(struct.unpack_from("<Q", data, at)[0])


class FlatBufferReader:
    """Bounds-checked reads of FlatBuffer tables, vectors, scalars and strings: every
    offset is checked against the buffer before it is followed."""

    def __init__(
        self,
        data: bytes,
        source: str,
        header: ExtendedHeader | None = None,
        kind: str = "program",
    ) -> None:
        self.data = data
        self.source = source
        self._extent = f"the {len(data)}-byte {kind}" + (
            "" if header is None else " the extended header (eh00) gives"
        )

    def _fail(self, what: str, problem: str) -> ProgramError:
        return ProgramError(f"{self.source}: {what}: {problem}; {_DAMAGED}")

    def _unpack(self, fmt: str, at: int, what: str) -> int:
        size = struct.calcsize(fmt)
        if not 0 <= at <= len(self.data) - size:
            raise self._fail(what, f"offset {at} is outside {self._extent}")
        return int(struct.unpack_from(fmt, self.data, at)[0])

    def _follow(self, at: int, what: str) -> int:
        """The position a uoffset at ``at`` points to."""
        return at + self._unpack("<I", at, what)

    def table(self, at: int, what: str) -> int:
        """The table a uoffset at ``at`` points to (its vtable checked)."""
        table = self._follow(at, what)
        vtable = table - self._unpack("<i", table, what)
        size = self._unpack("<H", vtable, what)
        if size < 4 or size % 2 or vtable + size > len(self.data):
            raise self._fail(
                what, f"a table's vtable of {size} bytes does not fit in {self._extent}"
            )
        return table

    def _field(self, table: int, index: int, what: str) -> int | None:
        """The position of field ``index`` of ``table``, or None when absent."""
        vtable = table - self._unpack("<i", table, what)
        slot = 4 + 2 * index
        if slot >= self._unpack("<H", vtable, what):
            return None
        offset = self._unpack("<H", vtable + slot, what)
        return table + offset if offset else None

    def scalar(self, table: int, index: int, fmt: str, what: str) -> int:
        """A scalar field (``struct`` format ``fmt``), 0 when absent (every default here)."""
        at = self._field(table, index, what)
        return 0 if at is None else self._unpack(fmt, at, what)

    def optional_table(self, table: int, index: int, what: str) -> int | None:
        at = self._field(table, index, what)
        return None if at is None else self.table(at, what)

    def string(self, table: int, index: int, what: str) -> str:
        at = self._field(table, index, what)
        if at is None:
            return ""
        start = self._follow(at, what)
        length = self._unpack("<I", start, what)
        if length > _MAX_STRING_BYTES or start + 4 + length > len(self.data):
            raise self._fail(what, f"a string of {length} bytes does not fit in {self._extent}")
        try:
            return self.data[start + 4 : start + 4 + length].decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(what, "the string is not UTF-8") from None

    def vector_length(self, table: int, index: int, entry_bytes: int, what: str) -> int:
        """How many entries of ``entry_bytes`` a vector field has (0 when absent), checked
        to fit."""
        at = self._field(table, index, what)
        if at is None:
            return 0
        start = self._follow(at, what)
        count = self._unpack("<I", start, what)
        if start + 4 + count * entry_bytes > len(self.data):
            raise self._fail(what, f"a vector of {count} entries does not fit in {self._extent}")
        return count

    def vector_bytes(self, table: int, index: int, entry_bytes: int, what: str) -> bytes:
        """The bytes of a vector of scalars of ``entry_bytes`` each (empty when absent)."""
        count = self.vector_length(table, index, entry_bytes, what)
        at = self._field(table, index, what)
        if at is None:
            return b""
        start = self._follow(at, what) + 4
        return self.data[start : start + count * entry_bytes]

    def vector_of_tables(self, table: int, index: int, what: str, limit: int) -> list[int]:
        at = self._field(table, index, what)
        if at is None:
            return []
        start = self._follow(at, what)
        count = self._unpack("<I", start, what)
        if count > limit:
            raise ProgramError(
                f"{self.source}: {what}: {count} entries, the harness checks at most {limit}; "
                "export fewer"
            )
        return [self.table(start + 4 + 4 * i, f"{what}[{i}]") for i in range(count)]
