"""What the options of a map may change in a model's outputs, and the first output element
that did change.

Users pass backend options to change how a backend works (threads, caches, workspaces,
performance and log settings), not what a model computes. Every option of the known
contracts (:mod:`harness.check.option_contracts`) and every probe option is therefore
*result-invariant*: with it, each output element must equal the run without it, bit for
bit. An option of a backend without a contract stays unjudged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.check.option_contracts import CONTRACTS
from harness.data.options import OptionValue
from harness.data.outputs import TensorOutput, format_element
from harness.errors import CheckFailure


def result_invariant(backend: str, key: str, probes: Sequence[str] = ()) -> bool:
    """Whether ``key`` of ``backend`` may change no output element: every option of a
    known contract, and any option of a probe."""
    if backend in probes:
        return True
    contract = CONTRACTS.get(backend)
    return contract is not None and contract.find(key) is not None


@dataclass(frozen=True)
class ElementChange:
    """Where two runs' outputs first differ: output ``output``, element ``element`` (None
    when the elements did not travel: then the digests, or the dtype or shape, differ)."""

    output: int
    element: int | None
    expected: str
    got: str

    def describe(self, compared_with: str = "the run without them") -> str:
        where = f"output {self.output}" + (
            f" element {self.element}" if self.element is not None else ""
        )
        return f"{where}: {self.got} where {compared_with} gave {self.expected}"


def first_change(
    baseline: Sequence[TensorOutput], got: Sequence[TensorOutput]
) -> ElementChange | None:
    """The first output element that differs (bit for bit) between two runs, or None."""
    for index, (a, b) in enumerate(zip(baseline, got, strict=False)):
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            return ElementChange(index, None, _form(a), _form(b))
        if a.elements is not None and b.elements is not None:
            for position, (x, y) in enumerate(zip(a.elements, b.elements, strict=True)):
                if not _same(x, y):
                    return ElementChange(
                        index, position, format_element(x, a.dtype), format_element(y, b.dtype)
                    )
        if a.digest != b.digest:
            return ElementChange(index, None, f"digest {a.digest}", f"digest {b.digest}")
    if len(baseline) != len(got):
        return ElementChange(
            min(len(baseline), len(got)), None, f"{len(baseline)} outputs", f"{len(got)} outputs"
        )
    return None


def _same(x: float | int | bool, y: float | int | bool) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or (
            x == y and math.copysign(1, x) == math.copysign(1, y)
        )
    return x == y


def _form(output: TensorOutput) -> str:
    return f"{output.dtype} {list(output.shape)}"


@dataclass(frozen=True)
class OutputEffect:
    """Options that changed a method's outputs: which (the smallest set found), where
    (method, load path, route, which load and execute), and the first changed element."""

    options: tuple[tuple[str, str, OptionValue], ...]  # (backend, key, value); () if none
    method: str
    path: str
    route: str
    run: str
    change: ElementChange
    judged: bool  # every option of the set is result-invariant: the change is a failure

    def describe(self) -> str:
        """One line: backend, option(s), method, path, output, element, the two values."""
        where = f"method {self.method!r}, load path {self.path} ({self.route}), {self.run}"
        if not self.options:
            change = self.change.describe("the first execute")
            return f"without options the outputs vary (nothing judged): {where}, {change}"
        named = ", ".join(f"{b} option {k}={v!r}" for b, k, v in self.options)
        verdict = "result-invariant, yet" if self.judged else "not judged (unknown option):"
        return f"{named} ({verdict} changed the outputs): {where}, {self.change.describe()}"


class OptionsChangedOutputs(AssertionError, CheckFailure):
    """A result-invariant option changed what the model computes: the first line names
    the backend, the option(s), the method, the load path, the output, the element and
    the two values. Report it to the backend's maintainers; leave the option out meanwhile."""

    def __init__(self, effects: Sequence[OutputEffect]) -> None:
        lines = [effect.describe() for effect in effects]
        super().__init__("\n".join(lines))
        self.effects = tuple(effects)


class OutputsOffReference(AssertionError, CheckFailure):
    """A method's outputs are not the reference committed with the program (beyond its
    tolerance): the runtime computes something else than torch did."""
