"""What an ExecuTorch program (``.pte``) holds, checked as the runtime's loader will check
it: its methods, each method's delegates and the operators it runs outside them, and its
segments.

A program file starts with a FlatBuffer of the wheel's ``schema/program.fbs`` (file
identifier ``ET12``), optionally followed by segments (delegate blobs, constant data)
that the FlatBuffer's ``segments`` table locates from a base offset. The ``eh00``
extended header at byte 8 (:mod:`harness.programs.layout`) says where the FlatBuffer
ends and where the segments start. ``Program::load`` and ``Method::init`` refuse a file
whose header disagrees with its size, or whose segments lie outside it; this module
refuses the same files before anything is pushed, each with one :class:`ProgramError`
naming the file, what is wrong and the fix.

Programs are untrusted input: this reads only the fields named below, checks every offset
and length against the FlatBuffer's bytes and the limits below before it follows it, and
never runs the program's code or a tool on its bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.codec.wire.format import MAX_ID_BYTES
from harness.programs.layout import (
    ExtendedHeader,
    FlatBufferReader,
    ProgramError,
    Segment,
    check_file_size,
    check_segments,
    parse_extended_header,
)
from harness.untrusted.reading import InputFileError, read_bounded_bytes

__all__ = [
    "MAX_PROGRAM_BYTES",
    "MethodContents",
    "ProgramContents",
    "ProgramError",
    "parse_program",
    "read_program",
]

MAX_PROGRAM_BYTES = 64 << 20
"""The largest program the harness pushes (64 MiB)."""
MAX_METHODS = 64
MAX_DELEGATES = 64
MAX_OPERATORS = 1024
MAX_SEGMENTS = 4096
IDENTIFIER = b"ET12"

# Field indices in program.fbs (a table's vtable slot = 2 + index).
_PROGRAM_EXECUTION_PLAN = 1
_PROGRAM_SEGMENTS = 4
_PROGRAM_CONSTANT_SEGMENT = 5
_PROGRAM_MUTABLE_DATA_SEGMENTS = 6
_PROGRAM_NAMED_DATA = 7
_PLAN_NAME = 0
_PLAN_OPERATORS = 6
_PLAN_DELEGATES = 7
_OPERATOR_NAME = 0
_OPERATOR_OVERLOAD = 1
_DELEGATE_ID = 0
_DELEGATE_PROCESSED = 1
_REFERENCE_LOCATION = 0  # DataLocation: INLINE = 0, SEGMENT = 1
_REFERENCE_INDEX = 1
_SEGMENT_OFFSET = 0
_SEGMENT_SIZE = 1
_SUBSEGMENTS_INDEX = 0
_SUBSEGMENTS_OFFSETS = 1
_NAMED_DATA_SEGMENT_INDEX = 1
_LOCATION_SEGMENT = 1


@dataclass(frozen=True)
class MethodContents:
    """One method of a program: its name, its delegates' backend ids in order, and the
    operators it runs outside them (``name.overload``, as the runtime looks them up)."""

    name: str
    delegates: tuple[str, ...]
    operators: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProgramContents:
    """A program file's bytes and what they hold."""

    source: str
    data: bytes
    methods: tuple[MethodContents, ...]
    header: ExtendedHeader | None = None
    segments: tuple[Segment, ...] = ()

    def method(self, name: str) -> MethodContents:
        for method in self.methods:
            if method.name == name:
                return method
        raise KeyError(name)

    def describe(self) -> str:
        """A few lines: the file, then each method's delegates and outside operators."""
        count = f"{len(self.methods)} method{'' if len(self.methods) == 1 else 's'}"
        lines = [f"program {self.source}: {len(self.data)} bytes, {count}"]
        for method in self.methods:
            delegates = ", ".join(_counted(method.delegates)) or "none"
            operators = ", ".join(method.operators) or "none"
            lines.append(
                f"  method {method.name!r}: delegates {delegates}; "
                f"operators outside delegates: {operators}"
            )
        return "\n".join(lines)


def _counted(names: tuple[str, ...]) -> list[str]:
    """``("A", "A", "B")`` as ``["A x2", "B"]``, in first-seen order."""
    return [
        name if names.count(name) == 1 else f"{name} x{names.count(name)}"
        for name in dict.fromkeys(names)
    ]


def read_program(path: str | os.PathLike[str], limit: int = MAX_PROGRAM_BYTES) -> ProgramContents:
    """The program file ``path``, read within ``limit`` bytes, and what it holds."""
    source = os.fspath(path)
    try:
        data = read_bounded_bytes(path, limit)
    except InputFileError as exc:
        raise ProgramError(f"program {exc}") from None
    return parse_program(data, source)


def parse_program(data: bytes, source: str = "program") -> ProgramContents:
    """What the program ``data`` holds; :class:`ProgramError` where the loader would refuse it."""
    if len(data) < 8 or data[4:8] != IDENTIFIER:
        raise ProgramError(
            f"{source}: not an ExecuTorch program (no {IDENTIFIER.decode()} FlatBuffer "
            "identifier at byte 4); give a .pte file exported by ExecuTorch"
        )
    check_file_size(data, source)
    header = parse_extended_header(data, source)
    flatbuffer = data if header is None else data[: header.program_size]
    reader = FlatBufferReader(flatbuffer, source, header)
    root = reader.table(0, "the program")
    segments = _segments(reader, root)
    methods, used = _methods(reader, root)
    if not methods:
        raise ProgramError(f"{source}: the program holds no method; export one with a method")
    if len({m.name for m in methods}) != len(methods):
        raise ProgramError(f"{source}: two methods share a name; the runtime loads by name")
    check_segments(data, header, segments, [*used, *_data_segments(reader, root)], source)
    return ProgramContents(source, data, tuple(methods), header, segments)


def _segments(reader: FlatBufferReader, root: int) -> tuple[Segment, ...]:
    tables = reader.vector_of_tables(root, _PROGRAM_SEGMENTS, "segments", MAX_SEGMENTS)
    return tuple(
        Segment(
            reader.scalar(table, _SEGMENT_OFFSET, "<Q", f"segments[{i}].offset"),
            reader.scalar(table, _SEGMENT_SIZE, "<Q", f"segments[{i}].size"),
        )
        for i, table in enumerate(tables)
    )


def _methods(
    reader: FlatBufferReader, root: int
) -> tuple[list[MethodContents], list[tuple[str, int]]]:
    """The methods, and the segment each delegate's blob is in (where it is in one)."""
    plans = reader.vector_of_tables(root, _PROGRAM_EXECUTION_PLAN, "execution_plan", MAX_METHODS)
    methods = []
    used = []
    for index, plan in enumerate(plans):
        where = f"execution_plan[{index}]"
        name = _id(reader, plan, _PLAN_NAME, f"{where}.name", "a method name")
        delegates = []
        for d, delegate in enumerate(
            reader.vector_of_tables(plan, _PLAN_DELEGATES, f"{where}.delegates", MAX_DELEGATES)
        ):
            at = f"{where}.delegates[{d}]"
            backend = _id(reader, delegate, _DELEGATE_ID, f"{at}.id", "a backend id")
            delegates.append(backend)
            processed = reader.optional_table(delegate, _DELEGATE_PROCESSED, f"{at}.processed")
            if (
                processed is not None
                and reader.scalar(processed, _REFERENCE_LOCATION, "<b", f"{at}.processed")
                == _LOCATION_SEGMENT
            ):
                segment = reader.scalar(processed, _REFERENCE_INDEX, "<I", f"{at}.processed")
                used.append((f"method {name!r}'s delegate {d} ({backend})", segment))
        operators = []
        for o, operator in enumerate(
            reader.vector_of_tables(plan, _PLAN_OPERATORS, f"{where}.operators", MAX_OPERATORS)
        ):
            at = f"{where}.operators[{o}]"
            op_name = reader.string(operator, _OPERATOR_NAME, f"{at}.name")
            overload = reader.string(operator, _OPERATOR_OVERLOAD, f"{at}.overload")
            operators.append(f"{op_name}.{overload}" if overload else op_name)
        methods.append(MethodContents(name, tuple(delegates), tuple(operators)))
    return methods, used


def _id(reader: FlatBufferReader, table: int, index: int, where: str, what: str) -> str:
    """A name the wire carries (a method, a backend): 1 to MAX_ID_BYTES bytes."""
    text = reader.string(table, index, where)
    if not 1 <= len(text.encode()) <= MAX_ID_BYTES:
        raise ProgramError(
            f"{reader.source}: {where}: {what} of 1 to {MAX_ID_BYTES} bytes is needed to load "
            f"it; got {len(text.encode())} bytes"
        )
    return text


def _data_segments(reader: FlatBufferReader, root: int) -> list[tuple[str, int]]:
    """The segments the program's data is in: constant, mutable and named data."""
    used = []
    constant = reader.optional_table(root, _PROGRAM_CONSTANT_SEGMENT, "constant_segment")
    # One offset is an empty constant segment, which the runtime never loads.
    offsets = "constant_segment.offsets"
    if (
        constant is not None
        and reader.vector_length(constant, _SUBSEGMENTS_OFFSETS, 8, offsets) > 1
    ):
        index = reader.scalar(constant, _SUBSEGMENTS_INDEX, "<I", "constant_segment")
        used.append(("the constant data", index))
    where = "mutable_data_segments"
    for i, table in enumerate(
        reader.vector_of_tables(root, _PROGRAM_MUTABLE_DATA_SEGMENTS, where, MAX_SEGMENTS)
    ):
        used.append((f"{where}[{i}]", reader.scalar(table, _SUBSEGMENTS_INDEX, "<I", where)))
    for i, table in enumerate(
        reader.vector_of_tables(root, _PROGRAM_NAMED_DATA, "named_data", MAX_SEGMENTS)
    ):
        index = reader.scalar(table, _NAMED_DATA_SEGMENT_INDEX, "<I", f"named_data[{i}]")
        used.append((f"named_data[{i}]", index))
    return used
