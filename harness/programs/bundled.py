"""ExecuTorch's BundledProgram (``.bpte``): a program with test inputs and expected outputs
per method, read within bounds as untrusted input.

The file is a FlatBuffer of devtools' ``bundled_program_schema.fbs`` (file identifier
``BP08``): the program's bytes (a whole ``.pte``, read by
:mod:`harness.programs.contents`) and, per method, test cases, each the method's
inputs and its expected outputs (tensors, ints, doubles, bools). The format declares no
tolerance: the expected outputs are compared as ExecuTorch's own verifier compares them
by default (``VerifyResultWithBundledExpectedOutput``: ``|got - expected| <= atol + rtol *
|expected|`` with :data:`RTOL` and :data:`ATOL`; integers and bools exactly).

Every offset, count and length is checked before it is followed; a file that breaks a
rule or a limit below is one :class:`ProgramError` naming the file, the field and the
limit. Each test case's inputs reach the agent as an inputs file beside the program
(:func:`inputs_file`; docs/agent.md, "Given inputs").
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from harness.programs.contents import (
    MAX_PROGRAM_BYTES,
    ProgramContents,
    ProgramError,
    parse_program,
    read_program,
)
from harness.programs.layout import FlatBufferReader
from harness.untrusted.reading import InputFileError, read_bounded_bytes

IDENTIFIER = b"BP08"
RTOL = 1e-5
ATOL = 1e-8
MAX_BUNDLED_BYTES = 2 * MAX_PROGRAM_BYTES
MAX_SUITES = 64
MAX_TEST_CASES = 256
MAX_VALUES = 64  # inputs or expected outputs of one test case
MAX_RANK = 16

# Field indices in bundled_program_schema.fbs.
_PROGRAM_SUITES = 1
_PROGRAM_BYTES = 2
_SUITE_METHOD = 0
_SUITE_CASES = 1
_CASE_INPUTS = 0
_CASE_EXPECTED = 1
_VALUE_TYPE = 0  # the union's type byte: 1 Tensor, 2 Int, 3 Bool, 4 Double
_VALUE = 1
_TENSOR_SCALAR_TYPE = 0
_TENSOR_SIZES = 1
_TENSOR_DATA = 2

# ExecuTorch's ScalarType codes (schema/scalar_type.fbs) of the dtypes the agent reports.
DTYPES = {0: "u8", 1: "i8", 2: "i16", 3: "i32", 4: "i64", 5: "f16", 6: "f32", 7: "f64"}
DTYPES |= {11: "bool", 15: "bf16"}
_WIDTHS = {"u8": 1, "i8": 1, "bool": 1, "i16": 2, "f16": 2, "bf16": 2, "i32": 4, "f32": 4}
_WIDTHS |= {"i64": 8, "f64": 8}
_UNION = {1: "tensor", 2: "int", 3: "bool", 4: "double"}
# The inputs file's tag of each kind of value (docs/agent.md, "Given inputs").
_FILE_TAGS = {"tensor": 1, "int": 2, "double": 3, "bool": 4}


@dataclass(frozen=True)
class BundledValue:
    """An input or expected output: a tensor (``dtype``, ``shape``, ``data`` its bytes) or
    a scalar (``kind`` ``int``, ``double`` or ``bool``, its ``scalar``)."""

    kind: str
    dtype: str = ""
    scalar_type: int = 0
    shape: tuple[int, ...] = ()
    data: bytes = b""
    scalar: float | int | bool = 0


@dataclass(frozen=True)
class BundledCase:
    """Test case ``index`` of a method: its inputs and the outputs they must give."""

    index: int
    inputs: tuple[BundledValue, ...]
    expected: tuple[BundledValue, ...]


@dataclass(frozen=True)
class BundledProgram:
    """A ``.bpte`` file: the program it embeds and each method's test cases."""

    source: str
    program: ProgramContents
    cases: dict[str, tuple[BundledCase, ...]]

    def describe(self) -> str:
        """The program's description (:meth:`ProgramContents.describe`), then each
        method's test cases."""
        counted = ", ".join(f"{m!r} {len(c)}" for m, c in self.cases.items())
        lines = [self.program.describe()]
        return "\n".join(lines + ([f"  test cases: {counted}"] if self.cases else []))


def is_bundled(data: bytes) -> bool:
    """Whether ``data`` is a BundledProgram (its identifier at byte 4)."""
    return data[4:8] == IDENTIFIER


def parse_bundled(data: bytes, source: str = "bundled program") -> BundledProgram:
    """What the BundledProgram ``data`` holds; :class:`ProgramError` where it breaks a rule."""
    if len(data) < 8 or not is_bundled(data):
        raise ProgramError(
            f"{source}: not a BundledProgram (no {IDENTIFIER.decode()} identifier at byte 4); "
            "give a .bpte file written by ExecuTorch's devtools"
        )
    reader = FlatBufferReader(data, source, kind="file")
    root = reader.table(0, "the bundled program")
    embedded = reader.vector_bytes(root, _PROGRAM_BYTES, 1, "program")
    if len(embedded) > MAX_PROGRAM_BYTES:
        raise ProgramError(
            f"{source}: program: {len(embedded)} bytes, the harness pushes at most "
            f"{MAX_PROGRAM_BYTES}; bundle a smaller program"
        )
    program = parse_program(embedded, f"{source} (its program)")
    methods = {m.name for m in program.methods}
    cases: dict[str, tuple[BundledCase, ...]] = {}
    suites = reader.vector_of_tables(root, _PROGRAM_SUITES, "method_test_suites", MAX_SUITES)
    for s, suite in enumerate(suites):
        where = f"method_test_suites[{s}]"
        method = reader.string(suite, _SUITE_METHOD, f"{where}.method_name")
        if method not in methods or method in cases:
            raise ProgramError(
                f"{source}: {where}.method_name: {method!r} is "
                + ("named twice" if method in cases else "no method of its program")
                + f" (its methods: {', '.join(sorted(methods))}); bundle the program again"
            )
        tables = reader.vector_of_tables(suite, _SUITE_CASES, f"{where}.test_cases", MAX_TEST_CASES)
        cases[method] = tuple(
            _case(reader, table, i, f"{where}.test_cases[{i}]") for i, table in enumerate(tables)
        )
    return BundledProgram(source, program, cases)


def _case(reader: FlatBufferReader, table: int, index: int, where: str) -> BundledCase:
    values = []
    for field, name in ((_CASE_INPUTS, "inputs"), (_CASE_EXPECTED, "expected_outputs")):
        tables = reader.vector_of_tables(table, field, f"{where}.{name}", MAX_VALUES)
        values.append(
            tuple(_value(reader, t, f"{where}.{name}[{i}]") for i, t in enumerate(tables))
        )
    return BundledCase(index, values[0], values[1])


def _value(reader: FlatBufferReader, table: int, where: str) -> BundledValue:
    kind = _UNION.get(reader.scalar(table, _VALUE_TYPE, "<B", f"{where}.val_type"))
    value = reader.optional_table(table, _VALUE, f"{where}.val")
    if kind is None or value is None:
        raise ProgramError(
            f"{reader.source}: {where}: not a Tensor, Int, Bool or Double value; "
            "bundle the program again"
        )
    if kind == "int":
        return BundledValue(kind, scalar=reader.scalar(value, 0, "<q", where))
    if kind == "bool":
        return BundledValue(kind, scalar=reader.scalar(value, 0, "<B", where) != 0)
    if kind == "double":
        raw = reader.scalar(value, 0, "<Q", where)
        return BundledValue(kind, scalar=struct.unpack("<d", struct.pack("<Q", raw))[0])
    code = reader.scalar(value, _TENSOR_SCALAR_TYPE, "<b", f"{where}.scalar_type")
    dtype = DTYPES.get(code)
    sizes = reader.vector_bytes(value, _TENSOR_SIZES, 4, f"{where}.sizes")
    rank = len(sizes) // 4
    shape = tuple(struct.unpack(f"<{rank}i", sizes)) if rank <= MAX_RANK else ()
    if dtype is None or rank > MAX_RANK or any(d < 0 for d in shape):
        raise ProgramError(
            f"{reader.source}: {where}: scalar type {code}, {rank} sizes {list(shape)}: the "
            f"harness takes the scalar types {sorted(DTYPES)} and at most {MAX_RANK} sizes, "
            "none negative"
        )
    data = reader.vector_bytes(value, _TENSOR_DATA, 1, f"{where}.data")
    needed = _WIDTHS[dtype]
    for size in shape:
        needed *= size
    if len(data) != needed:
        raise ProgramError(
            f"{reader.source}: {where}.data: {len(data)} bytes, its {dtype} sizes "
            f"{list(shape)} take {needed}; bundle the program again"
        )
    return BundledValue("tensor", dtype, code, shape, data)


def inputs_file(method: str, case: BundledCase) -> bytes:
    """The inputs file of ``case`` for ``method``: its inputs, then its expected outputs
    and :data:`RTOL` and :data:`ATOL`, which the agent compares each execute's outputs
    with (docs/agent.md, "Given inputs")."""
    name = method.encode()
    parts = [b"ETBI", struct.pack("<H", len(name)), name, struct.pack("<H", len(case.inputs))]
    for value in case.inputs:
        parts.append(struct.pack("<B", _FILE_TAGS[value.kind]))
        if value.kind == "tensor":
            parts.append(_tensor_bytes(value))
        elif value.kind == "int":
            parts.append(struct.pack("<q", value.scalar))
        elif value.kind == "double":
            parts.append(struct.pack("<d", value.scalar))
        else:
            parts.append(struct.pack("<B", int(bool(value.scalar))))
    parts.append(struct.pack("<H", len(case.expected)))
    for value in case.expected:  # only tensors are compared: the report describes those
        tensor = value.kind == "tensor"
        parts += [struct.pack("<B", int(tensor))] + ([_tensor_bytes(value)] if tensor else [])
    parts.append(struct.pack("<dd", RTOL, ATOL))
    return b"".join(parts)


def _tensor_bytes(value: BundledValue) -> bytes:
    rank = len(value.shape)
    head = struct.pack(f"<BB{rank}iI", value.scalar_type, rank, *value.shape, len(value.data))
    return head + value.data


def read_checked(path: str | os.PathLike[str]) -> BundledProgram:
    """The program file ``path`` a check takes: a BundledProgram, or a ``.pte`` (then
    without test cases), read within its bound."""
    source = os.fspath(path)
    try:
        data = read_bounded_bytes(path, MAX_BUNDLED_BYTES)
    except InputFileError as exc:
        raise ProgramError(f"program {exc}") from None
    if is_bundled(data):
        return parse_bundled(data, source)
    if len(data) > MAX_PROGRAM_BYTES:
        read_program(path)  # refuses it as any program over the bound is refused
    return BundledProgram(source, parse_program(data, source), {})
