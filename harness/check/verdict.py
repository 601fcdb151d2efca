"""The verdict of a whole report (:class:`Verdict`), and the failures it raises.

What differs, per difference and per backend, is :mod:`harness.check.differences`'s; the
text of a verdict is :mod:`harness.check.rendering`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.check import rendering
from harness.check.differences import BackendOutcome, Difference, DifferenceKind
from harness.data.messages import Action, LoadPath, Report
from harness.errors import CheckFailure


class DeliveryMismatch(AssertionError, CheckFailure):
    """The backends did not receive exactly what was sent; the message is the full diff."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(verdict.render())


class Examination:
    """Whether a verdict's differences were looked at: the one mutable part of a verdict."""

    __slots__ = ("examined",)

    def __init__(self) -> None:
        self.examined = False


class VerdictNotExamined(AssertionError, CheckFailure):
    """A test ended with verdicts whose differences it never looked at: a forgotten check.

    The message names the call that made each one and what to do.
    """

    def __init__(self, verdicts: tuple[Verdict, ...]) -> None:
        self.verdicts = verdicts
        lines = [
            f"{v.made_at or 'a check'} returned a verdict with differences that the test "
            f"never examined: {v.summary()}"
            for v in verdicts
        ]
        super().__init__(
            "\n".join(lines) + "\ncheck it with verdict.raise_for_differences() (or assert on "
            "verdict.ok / verdict.kinds()); a test of a refusal that asserts on "
            "verdict.report alone says so with verdict.ignore_differences()"
        )


@dataclass(frozen=True, repr=False)
class Verdict:
    """The result of one check: every difference, per backend and for the report.

    ``ignored_backends`` are map entries for backends that are not delegates of the
    program (LOAD only): the runtime ignores them silently, which is not a failure.
    ``path`` is the load path a LOAD went through (None for SET and GET). ``made_at``
    is the test's call that made it (``suites/test_x.py:12 et.load``), where known.

    A verdict is *examined* once ``ok``, ``differences``, ``kinds()``, ``backend()``,
    ``raise_for_differences()``, ``summary()``, ``render()`` or ``ignore_differences()``
    was called: the ``et`` fixture fails a test that leaves a verdict with differences
    unexamined (:attr:`examined`).
    """

    action: Action
    report: Report
    backends: tuple[BackendOutcome, ...] = ()
    report_differences: tuple[Difference, ...] = ()
    ignored_backends: tuple[str, ...] = ()
    path: LoadPath | None = None
    made_at: str = field(default="", compare=False)
    _examination: Examination = field(default_factory=Examination, compare=False)

    @property
    def label(self) -> str:
        """``load``, ``set``, ``get``; a LOAD on another path than program names it:
        ``load [module_both]``."""
        action = self.action.name.lower()
        if self.path is None or self.path is LoadPath.PROGRAM:
            return action
        return f"{action} [{self.path.label}]"

    @property
    def differences(self) -> tuple[Difference, ...]:
        """All differences: the report's first, then each backend's, in request order."""
        self._examination.examined = True
        return self.report_differences + tuple(d for b in self.backends for d in b.differences)

    @property
    def ok(self) -> bool:
        return not self.differences

    @property
    def examined(self) -> bool:
        """True once the test looked at the differences (see the class docstring)."""
        return self._examination.examined

    @property
    def unexamined_differences(self) -> bool:
        """True for a verdict with differences that nobody looked at: a forgotten check.
        Reading this does not count as examining."""
        return not self.examined and bool(
            self.report_differences or any(b.differences for b in self.backends)
        )

    def ignore_differences(self) -> Verdict:
        """Mark the differences as deliberately not checked and return the verdict: for
        a test of a refusal that asserts on ``verdict.report`` alone."""
        self._examination.examined = True
        return self

    def backend(self, name: str) -> BackendOutcome | None:
        """The outcome for backend ``name``, or None."""
        self._examination.examined = True
        return next((b for b in self.backends if b.name == name), None)

    def kinds(self) -> tuple[DifferenceKind, ...]:
        """The kind of each difference, in order: handy for assertions."""
        return tuple(d.kind for d in self.differences)

    def __repr__(self) -> str:
        """The summary, so that a failing ``assert verdict.ok`` names the differences."""
        return f"<Verdict {self.summary()}>"

    def raise_for_differences(self) -> None:
        """Raise :class:`DeliveryMismatch` (an AssertionError) unless the check passed."""
        if not self.ok:
            raise DeliveryMismatch(self)

    def summary(self) -> str:
        """One line: ``load: ok, 2 backends as expected`` or the first few differences."""
        self._examination.examined = True
        return rendering.summary(self)

    def render(self, *, ignored: bool = True) -> str:
        """Multi-line text: the report's problems, then each backend's aligned options, then
        (unless not ``ignored``) the line naming :attr:`ignored_backends`."""
        self._examination.examined = True
        return rendering.render(self, ignored=ignored)
