"""What an ExecuTorch program (``.pte``) holds: its methods and each method's delegates,
read from the program itself.

A program is a FlatBuffer of the wheel's ``schema/program.fbs`` (file identifier
``ET12``): ``Program.execution_plan`` is the list of methods, each ``ExecutionPlan``
has a ``name`` and ``delegates``, each ``BackendDelegate`` an ``id`` (the backend it
names). Programs are untrusted input: this reads only those fields, checks every offset
and length against the buffer and the limits below before it follows it, and refuses
anything else with a :class:`ProgramError` naming the file, the place and the fix. It
never runs the program's code or a tool on its bytes.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from harness.codec.wire.format import MAX_ID_BYTES
from harness.errors import UsageError
from harness.untrusted.reading import InputFileError, read_bounded_bytes

MAX_PROGRAM_BYTES = 64 << 20
"""The largest program the harness pushes (64 MiB)."""
MAX_METHODS = 64
MAX_DELEGATES = 64
IDENTIFIER = b"ET12"

# Field indices in program.fbs (a table's vtable slot = 2 + index).
_PROGRAM_EXECUTION_PLAN = 1
_PLAN_NAME = 0
_PLAN_DELEGATES = 7
_DELEGATE_ID = 0


class ProgramError(ValueError, UsageError):
    """A file that is not a program the harness can load, with what to do."""


@dataclass(frozen=True)
class MethodContents:
    """One method of a program: its name and its delegates' backend ids, in order."""

    name: str
    delegates: tuple[str, ...]


@dataclass(frozen=True)
class ProgramContents:
    """A program file's bytes and the methods it holds."""

    source: str
    data: bytes
    methods: tuple[MethodContents, ...]

    def method(self, name: str) -> MethodContents:
        for method in self.methods:
            if method.name == name:
                return method
        raise KeyError(name)


def read_program(path: str | os.PathLike[str], limit: int = MAX_PROGRAM_BYTES) -> ProgramContents:
    """The program file ``path``, read within ``limit`` bytes, and its methods."""
    source = os.fspath(path)
    try:
        data = read_bounded_bytes(path, limit)
    except InputFileError as exc:
        raise ProgramError(f"program {exc}") from None
    return ProgramContents(source, data, parse_methods(data, source))


def parse_methods(data: bytes, source: str = "program") -> tuple[MethodContents, ...]:
    """The methods of the program ``data``; :class:`ProgramError` if it is not one."""
    reader = _Reader(data, source)
    if len(data) < 8 or data[4:8] != IDENTIFIER:
        raise ProgramError(
            f"{source}: not an ExecuTorch program (no {IDENTIFIER.decode()} FlatBuffer "
            "identifier at byte 4); give a .pte file exported by ExecuTorch"
        )
    root = reader.table(0, "the program")
    plans = reader.vector_of_tables(root, _PROGRAM_EXECUTION_PLAN, "execution_plan", MAX_METHODS)
    methods = []
    for index, plan in enumerate(plans):
        where = f"execution_plan[{index}]"
        name = reader.string(plan, _PLAN_NAME, f"{where}.name")
        if not 1 <= len(name.encode()) <= MAX_ID_BYTES:
            raise ProgramError(
                f"{source}: {where}.name: a method name of 1 to {MAX_ID_BYTES} bytes is "
                f"needed to load it; got {len(name.encode())} bytes"
            )
        delegates = []
        where_delegates = f"{where}.delegates"
        for d, delegate in enumerate(
            reader.vector_of_tables(plan, _PLAN_DELEGATES, where_delegates, MAX_DELEGATES)
        ):
            backend = reader.string(delegate, _DELEGATE_ID, f"{where_delegates}[{d}].id")
            if not 1 <= len(backend.encode()) <= MAX_ID_BYTES:
                raise ProgramError(
                    f"{source}: {where_delegates}[{d}].id: a backend id of 1 to "
                    f"{MAX_ID_BYTES} bytes is needed; got {len(backend.encode())} bytes"
                )
            delegates.append(backend)
        methods.append(MethodContents(name, tuple(delegates)))
    if not methods:
        raise ProgramError(f"{source}: the program holds no method; export one with a method")
    if len({m.name for m in methods}) != len(methods):
        raise ProgramError(f"{source}: two methods share a name; the runtime loads by name")
    return tuple(methods)


class _Reader:
    """Bounds-checked reads of FlatBuffer tables, vectors and strings."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.source = source

    def _fail(self, what: str, problem: str) -> ProgramError:
        return ProgramError(
            f"{self.source}: {what}: {problem}; the file is damaged or not an ExecuTorch "
            "program (export it again)"
        )

    def _u32(self, at: int, what: str) -> int:
        if not 0 <= at <= len(self.data) - 4:
            raise self._fail(what, f"offset {at} is outside the {len(self.data)}-byte file")
        return int(struct.unpack_from("<I", self.data, at)[0])

    def _u16(self, at: int, what: str) -> int:
        if not 0 <= at <= len(self.data) - 2:
            raise self._fail(what, f"offset {at} is outside the {len(self.data)}-byte file")
        return int(struct.unpack_from("<H", self.data, at)[0])

    def _follow(self, at: int, what: str) -> int:
        """The position a uoffset at ``at`` points to."""
        return at + self._u32(at, what)

    def table(self, at: int, what: str) -> int:
        """The table a uoffset at ``at`` points to (its vtable checked)."""
        table = self._follow(at, what)
        self._u32(table, what)  # in the file
        vtable = table - struct.unpack_from("<i", self.data, table)[0]
        size = self._u16(vtable, what)
        if size < 4 or size % 2 or vtable + size > len(self.data):
            raise self._fail(what, f"a table's vtable of {size} bytes does not fit")
        return table

    def _field(self, table: int, index: int, what: str) -> int | None:
        """The position of field ``index`` of ``table``, or None when absent."""
        soffset = struct.unpack_from("<i", self.data, table)[0]
        vtable = table - soffset
        slot = 4 + 2 * index
        if slot >= self._u16(vtable, what):
            return None
        offset = self._u16(vtable + slot, what)
        return table + offset if offset else None

    def string(self, table: int, index: int, what: str) -> str:
        at = self._field(table, index, what)
        if at is None:
            return ""
        start = self._follow(at, what)
        length = self._u32(start, what)
        if length > MAX_ID_BYTES * 4 or start + 4 + length > len(self.data):
            raise self._fail(what, f"a string of {length} bytes does not fit")
        raw = self.data[start + 4 : start + 4 + length]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(what, "the string is not UTF-8") from None

    def vector_of_tables(self, table: int, index: int, what: str, limit: int) -> list[int]:
        at = self._field(table, index, what)
        if at is None:
            return []
        start = self._follow(at, what)
        count = self._u32(start, what)
        if count > limit:
            raise ProgramError(
                f"{self.source}: {what}: {count} entries, the harness checks at most {limit}; "
                "export fewer"
            )
        return [self.table(start + 4 + 4 * i, f"{what}[{i}]") for i in range(count)]
