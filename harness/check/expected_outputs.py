"""A method's outputs against the elements expected of them, within a tolerance (the
reference committed with a program; a BundledProgram's expected outputs are compared by
the agent, on the device, the same way: docs/agent.md, "Given inputs").

Two elements agree as ExecuTorch's own verifier has them agree
(``VerifyResultWithBundledExpectedOutput``): ``|got - expected| <= atol + rtol *
|expected|`` for floats, NaN with NaN and an infinity with the same one; integers and
bools exactly. An output whose elements did not travel (past the report's bound) cannot
be compared, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.data.outputs import Element, TensorOutput, format_element


@dataclass(frozen=True)
class Tolerance:
    """How far a float element may be from the expected one."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class ExpectedOutput:
    """What output ``index``'s elements must be."""

    index: int
    elements: tuple[Element, ...]


def first_off(
    expected: Sequence[ExpectedOutput], got: Sequence[TensorOutput], tolerance: Tolerance
) -> str | None:
    """Where ``got`` first leaves ``expected`` (``output 0 element 3: expected 0.5, got
    -0``), or None when every expected output agrees."""
    by_index = {output.index: output for output in got}
    for wanted in expected:
        where = f"output {wanted.index}"
        output = by_index.get(wanted.index)
        if output is None:
            return f"{where}: expected, but the report describes no such tensor output"
        if output.elements is None:
            return f"{where}: its elements did not travel (over the report's bound): no comparison"
        if len(output.elements) != len(wanted.elements):
            return f"{where}: expected {len(wanted.elements)} elements, got {len(output.elements)}"
        for position, (value, target) in enumerate(
            zip(output.elements, wanted.elements, strict=True)
        ):
            if not _close(value, target, tolerance):
                return (
                    f"{where} element {position}: expected {format_element(target, output.dtype)}, "
                    f"got {format_element(value, output.dtype)}"
                )
    return None


def _close(got: Element, expected: Element, tolerance: Tolerance) -> bool:
    if not (isinstance(got, float) or isinstance(expected, float)):
        return got == expected
    a, b = float(got), float(expected)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tolerance.atol + tolerance.rtol * abs(b)
