"""A method's outputs after one execute, as a LOAD or EXECUTE report describes them
(docs/wire-format.md, "Outputs"), and the inputs the agent fed it (docs/agent.md,
"Inputs"), reproduced here.

Each tensor output is a :class:`TensorOutput`: its dtype, shape, an FNV-1a digest of its
bytes, how many elements are not finite, the lowest and highest finite element, and the
elements themselves when they are few enough to travel (``elements`` None otherwise).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from harness.data.messages import Report
from harness.errors import InfrastructureError

# dtype -> struct format of one element (little-endian); bf16 and f16 are decoded apart.
_FORMATS = {
    "f32": "<f",
    "f64": "<d",
    "f16": "<e",
    "i64": "<q",
    "i32": "<i",
    "i16": "<h",
    "i8": "<b",
    "u8": "<B",
    "bool": "<?",
}
_WIDTHS = {**{name: struct.calcsize(f) for name, f in _FORMATS.items()}, "bf16": 2}
FLOAT_DTYPES = frozenset({"f32", "f64", "f16", "bf16"})


class OutputsUnreadable(InfrastructureError):
    """A report's output facts do not follow docs/wire-format.md ("Outputs"): the agent
    is not this harness's; rebuild it."""


Element = float | int | bool


@dataclass(frozen=True)
class TensorOutput:
    """Output ``index`` of a method after one execute."""

    index: int
    dtype: str
    shape: tuple[int, ...]
    digest: str
    non_finite: int
    elements: tuple[Element, ...] | None
    low: float | int | None
    high: float | int | None

    def render(self) -> str:
        """``output 0: f32 [1, 8] digest 3f0c... 0 non-finite, -0.668 .. 0.811: 0.2169, ...``"""
        shape = "[" + ", ".join(str(d) for d in self.shape) + "]"
        span = "no finite element" if self.low is None else f"{self.low:g} .. {self.high:g}"
        text = f"output {self.index}: {self.dtype} {shape} digest {self.digest}, "
        text += f"{self.non_finite} non-finite, {span}"
        if self.elements is None:
            return text + " (elements not sent: too many)"
        shown = ", ".join(format_element(e, self.dtype) for e in self.elements[:16])
        more = f", ... ({len(self.elements)} in all)" if len(self.elements) > 16 else ""
        return f"{text}: {shown}{more}"


def format_element(value: Element, dtype: str = "f64") -> str:
    """An element as it is: ``-0``, ``nan``, ``-3.9e-32``: the shortest text that reads
    back as the same value of ``dtype``."""
    if not isinstance(value, float):
        return str(value)
    if value == 0 and math.copysign(1, value) < 0:
        return "-0"
    if dtype in ("f32", "f16", "bf16") and math.isfinite(value):
        for digits in range(1, 10):
            text = f"{value:.{digits}g}"
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == value:
                return text
    return repr(value)


def outputs_of(report: Report) -> tuple[TensorOutput, ...]:
    """The tensor outputs a LOAD or EXECUTE report describes, in output order."""
    count = report.fact("output_count")
    if count is None:
        return ()
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise OutputsUnreadable(f"output_count {count!r} is not a count: rebuild the agent")
    found = []
    for index in range(min(count, 8)):
        summary = report.fact(f"output:{index}")
        if summary is None:
            continue
        if not isinstance(summary, str):
            raise OutputsUnreadable(f"output:{index} {summary!r} is not a string")
        found.append(_decode(index, summary, report))
    return tuple(found)


def _decode(index: int, summary: str, report: Report) -> TensorOutput:
    parts = summary.split(" ")
    if len(parts) != 6 or parts[0] not in _WIDTHS:
        raise OutputsUnreadable(f"output:{index} {summary!r}: not DTYPE [SHAPE] DIGEST N LOW HIGH")
    dtype, shape_text, digest, non_finite, low, high = parts
    try:
        inner = shape_text.removeprefix("[").removesuffix("]")
        shape = tuple(int(d) for d in inner.split(",")) if inner else ()
        numbers = (int(non_finite), _bound(low, dtype), _bound(high, dtype))
    except ValueError:
        raise OutputsUnreadable(f"output:{index} {summary!r}: a field is not a number") from None
    numel = math.prod(shape)
    elements = _elements(index, dtype, numel, report)
    return TensorOutput(index, dtype, shape, digest, numbers[0], elements, numbers[1], numbers[2])


def _bound(text: str, dtype: str) -> float | int | None:
    if text == "-":
        return None
    return float(text) if dtype in FLOAT_DTYPES else int(text)


def _elements(index: int, dtype: str, numel: int, report: Report) -> tuple[Element, ...] | None:
    """The elements from the chunks ``output:K.J``; None when none were sent."""
    if numel == 0:
        return ()
    chunks: list[str] = []
    while isinstance(chunk := report.fact(f"output:{index}.{len(chunks)}"), str):
        chunks.append(chunk)
    if not chunks:
        return None
    try:
        data = bytes.fromhex("".join(chunks))
    except ValueError:
        raise OutputsUnreadable(f"output:{index}: its element chunks are not hex") from None
    if len(data) != numel * _WIDTHS[dtype]:
        raise OutputsUnreadable(
            f"output:{index}: {len(data)} element bytes for {numel} {dtype} elements"
        )
    if dtype == "bf16":
        halves = struct.unpack(f"<{numel}H", data)
        return tuple(struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves)
    return tuple(v[0] for v in struct.iter_unpack(_FORMATS[dtype], data))


def digest_of(data: bytes) -> str:
    """FNV-1a (64 bits) of ``data`` as the agent prints it: 16 lowercase hex digits."""
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def input_draw(input_index: int, element: int) -> int:
    """The agent's seeded draw for element ``element`` of input ``input_index``
    (splitmix64's output step on ``input_index * 2**32 + element``)."""
    mask = 0xFFFFFFFFFFFFFFFF
    z = ((input_index << 32) + element + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def input_value(dtype: str, input_index: int, element: int) -> Element:
    """The value the agent gives element ``element`` of input ``input_index`` of a
    tensor of ``dtype`` (docs/agent.md, "Inputs")."""
    draw = input_draw(input_index, element)
    kind, more = draw % 8, draw >> 8
    large = (-1 if more & 1 else 1) * (512 + (more >> 1) % 512)
    if dtype in ("f32", "f64"):
        return 0.0 if kind == 0 else float(large) if kind == 1 else ((more % 513) - 256) / 64
    if dtype in ("i64", "i32", "i16"):
        return 0 if kind == 0 else large if kind == 1 else (more % 201) - 100
    if dtype == "i8":
        return 0 if kind == 0 else (more % 256) - 128
    if dtype == "u8":
        return 0 if kind == 0 else more % 256
    if dtype == "bool":
        return bool(more & 1)
    raise ValueError(f"dtype {dtype!r}: the agent feeds f32, f64, i64, i32, i16, i8, u8, bool")


def input_values(dtype: str, input_index: int, count: int) -> tuple[Element, ...]:
    """The first ``count`` elements of input ``input_index`` (a tensor of ``dtype``)."""
    return tuple(input_value(dtype, input_index, j) for j in range(count))
