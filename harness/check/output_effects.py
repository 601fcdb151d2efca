"""What the options of a map may change in a model's outputs, and the first output element
that did change.

Users pass backend options to change how a backend works (threads, caches, workspaces,
performance and log settings), not what a model computes. Each option of a contract
(:mod:`harness.check.option_contracts`; a probe's: result-invariant) or declared in the
map file says what it may change (:class:`~harness.data.effects.OptionEffect`):
*result-invariant* (and *file*): each output element must equal the run without it, bit
for bit; *numerics*: within its tolerance. An option nothing declares stays unjudged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.check.wording import show_name
from harness.data.effects import Changes, OptionEffect
from harness.data.options import OptionValue
from harness.data.outputs import TensorOutput, format_element
from harness.errors import CheckFailure

Judged = Mapping[tuple[str, str], OptionEffect]  # (backend, key): what it may change


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
    baseline: Sequence[TensorOutput], got: Sequence[TensorOutput], tolerance: float = 0.0
) -> ElementChange | None:
    """The first output element that differs between two runs (bit for bit, or beyond a
    relative and absolute ``tolerance``), or None. Within a tolerance, outputs whose
    elements did not travel are compared by their non-finite count, least and greatest."""
    for index, (a, b) in enumerate(zip(baseline, got, strict=False)):
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            return ElementChange(index, None, _form(a), _form(b))
        if a.elements is not None and b.elements is not None:
            for position, (x, y) in enumerate(zip(a.elements, b.elements, strict=True)):
                if not _same(x, y, tolerance):
                    return ElementChange(
                        index, position, format_element(x, a.dtype), format_element(y, b.dtype)
                    )
        elif tolerance:
            if not _same_range(a, b, tolerance):
                return ElementChange(index, None, _range(a), _range(b))
            continue
        if a.digest != b.digest:
            return ElementChange(index, None, f"digest {a.digest}", f"digest {b.digest}")
    if len(baseline) != len(got):
        return ElementChange(
            min(len(baseline), len(got)), None, f"{len(baseline)} outputs", f"{len(got)} outputs"
        )
    return None


def _same(x: float | int | bool, y: float | int | bool, tolerance: float = 0.0) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        if tolerance:
            return math.isclose(x, y, rel_tol=tolerance, abs_tol=tolerance)
        return x == y and math.copysign(1, x) == math.copysign(1, y)
    return x == y


def _same_range(a: TensorOutput, b: TensorOutput, tolerance: float) -> bool:
    """The same non-finite count, least and greatest element, within ``tolerance``."""
    if a.non_finite != b.non_finite:
        return False
    return all(
        (x is None and y is None)
        or (x is not None and y is not None and _same(float(x), float(y), tolerance))
        for x, y in ((a.low, b.low), (a.high, b.high))
    )


def _range(output: TensorOutput) -> str:
    return f"{output.non_finite} non-finite, {output.low} .. {output.high}"


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
    judged: bool  # every option of the set says what it may change: the change is a failure
    tolerance: float = 0.0  # the numerics options' largest, which the change went beyond

    def describe(self) -> str:
        """One line: backend, option(s), method, path, output, element, the two values."""
        where = f"method {self.method!r}, load path {self.path} ({self.route}), {self.run}"
        if not self.options:
            change = self.change.describe("the first execute")
            return f"without options the outputs vary (nothing judged): {where}, {change}"
        named = ", ".join(f"{b} option {k}={v!r}" for b, k, v in self.options)
        verdict = "result-invariant, yet" if self.judged else "not judged (unknown option):"
        if self.judged and self.tolerance:
            verdict = f"numerics within {self.tolerance:g}, yet beyond it"
        return f"{named} ({verdict} changed the outputs): {where}, {self.change.describe()}"


def tolerance_of(options: Sequence[tuple[str, str]], judged: Judged) -> float:
    """How far ``options`` (backend, key) may move an output element: the largest
    tolerance of their ``numerics`` ones, 0 (bit for bit) if none."""
    numerics = (judged.get(option) for option in options)
    return max((e.tolerance for e in numerics if e and e.changes is Changes.NUMERICS), default=0)


@dataclass(frozen=True)
class FileObservation:
    """Whether an option with a ``file`` effect left its file after a load with the map:
    ``observed`` None when it could not be looked for (``why`` says why)."""

    backend: str
    key: str
    file: str
    method: str
    path: str
    observed: bool | None
    why: str = ""

    def describe(self) -> str:
        """One line: the option, where, and what was found."""
        option = f"{show_name(self.backend)} option {self.key}={self.file!r}"
        where = f"method {self.method!r}, load path {self.path} (at load time)"
        if self.observed is None:
            return f"{option}: its file was not looked for ({self.why}): {where}"
        if self.observed:
            return f"{option} left its file: {where}"
        return f"{option} left no file at its path (a set that changed nothing): {where}"


class EffectNotObserved(AssertionError, CheckFailure):
    """An option whose declared effect is a file left none after a load with it: it was
    delivered, and changed nothing. Each line names the backend, option, method and path."""

    def __init__(self, observations: Sequence[FileObservation]) -> None:
        super().__init__("\n".join(o.describe() for o in observations))
        self.observations = tuple(observations)


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
