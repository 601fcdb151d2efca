"""The verdict's types: what differs (:class:`Difference`), per backend
(:class:`BackendOutcome`) and for a whole report (:class:`Verdict`).

The text of a verdict is :mod:`harness.check.rendering`'s; the methods that return
text import it when called, as it reads these types.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypeAlias

from harness.data.messages import Action, LoadPath, Outcome, Report, ReportEntry
from harness.data.options import Option, OptionValue
from harness.errors import CheckFailure


class DifferenceKind(enum.Enum):
    """What differs. Comments give what ``expected`` / ``actual`` hold for each kind."""

    MISSING_OPTION = enum.auto()  # sent value / None
    EXTRA_OPTION = enum.auto()  # None / received value (not sent to this backend)
    WRONG_TYPE = enum.auto()  # sent value / received value, of another type
    WRONG_VALUE = enum.auto()  # sent value / received value, same type
    WRONG_ORDER = enum.auto()  # sent keys / received keys, in order
    MISROUTED = enum.auto()  # None / received value; ``belongs_to`` names its owners
    NOTHING_DELIVERED = enum.auto()  # sent options / ()
    NOT_CALLED = enum.auto()  # expected calls / 0; ``key`` is the hook
    UNEXPECTED_DELIVERY = enum.auto()  # None / received value; nothing was sent to it
    WRONG_STATUS = enum.auto()  # expected Error code / reported Error code
    WRONG_CALL_COUNT = enum.auto()  # expected calls / reported calls; ``key`` is the hook
    UNEXPECTED_OUTCOME = enum.auto()  # Outcome.OK / reported Outcome; ``note``: detail
    WRONG_ACTION = enum.auto()  # request's Action / report's Action
    UNEXPECTED_ENTRY = enum.auto()  # None / the ReportEntry; ``note``: why not expected
    DUPLICATE_ENTRY = enum.auto()  # 1 / number of entries with that name
    MISSING_ENTRY = enum.auto()  # None / None: no entry for a backend of the request
    WRONG_PATH = enum.auto()  # requested load path / the path the report says was served
    CROSS_MODEL = enum.auto()  # own value or None / received value; ``belongs_to``: models
    NOT_RECORDED = enum.auto()  # None / the ReportEntry, without the records the device announced
    BACKEND_STATUS = enum.auto()  # the backend's own Error code / the one reported; ``key``: hook
    # GET of a recorded backend: the value the backend's call left / the value the runtime
    # handed back to its caller (None where one end has no such option); ``key``: the option
    CHANGED_ON_RETURN = enum.auto()
    # a backend of the request the device has none of, and no probe: None / None on LOAD (no
    # delegate, its entry ignored), the expected Error code / NotFound on SET and GET;
    # ``key`` is the hook
    NO_SUCH_BACKEND = enum.auto()


HOOKS = {Action.LOAD: "init", Action.SET: "set_option", Action.GET: "get_option"}
"""The backend hook each action calls: the ``key`` of call-count differences."""

DifferenceValue: TypeAlias = (
    OptionValue | Action | Outcome | ReportEntry | tuple[str, ...] | tuple[Option, ...] | None
)
"""What a :class:`Difference` holds as ``expected`` and ``actual``: an option value, a
count, status or path label, an action or outcome, a report entry, option keys or
options (see :class:`DifferenceKind` for which kind holds which)."""


@dataclass(frozen=True)
class Difference:
    """One way a report differs from what was expected.

    ``backend`` is None for problems of the report as a whole. ``key`` is the
    option key, or the hook's name (``init``) for call-count kinds. ``returned`` marks
    a GET's option difference: ``expected`` is what the test expected (or requested),
    ``actual`` what ``get_option`` returned, nothing was sent or received.
    """

    kind: DifferenceKind
    backend: str | None
    key: str | None = None
    expected: DifferenceValue = None
    actual: DifferenceValue = None
    belongs_to: tuple[str, ...] = ()
    note: str = ""
    returned: bool = field(default=False, compare=False)  # the wording's, not the difference's

    def describe(self, with_backend: bool = True) -> str:
        """One sentence saying what differs, e.g. ``ProbeB: option 'fast': sent ...``."""
        from harness.check.rendering import describe

        return describe(self, with_backend)


@dataclass(frozen=True)
class OptionRow:
    """A sent option beside the received option of the same key, as the check paired them."""

    sent_index: int | None
    sent: Option | None
    received_index: int | None
    received: Option | None
    difference: Difference | None = None


@dataclass(frozen=True)
class BackendOutcome:
    """What was expected of one backend, what its report entry said, and the differences.

    ``expected_options`` is None when options cannot be compared (the entry is not a
    probe's, or there is no entry); ``expected_calls`` is None when calls are not
    checked. ``values_checked`` is False for a GET with no expected values: then only
    keys, types and order are compared. ``absent``: the device has no backend of this
    name (and the harness registered no probe under it).
    """

    name: str
    entry: ReportEntry | None
    expected_status: int
    expected_calls: int | None
    expected_options: tuple[Option, ...] | None
    rows: tuple[OptionRow, ...] = ()
    differences: tuple[Difference, ...] = ()
    values_checked: bool = True
    absent: bool = False

    @property
    def ok(self) -> bool:
        return not self.differences


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
        from harness.check.rendering import summary

        self._examination.examined = True
        return summary(self)

    def render(self, *, ignored: bool = True) -> str:
        """Multi-line text: the report's problems, then each backend's aligned options, then
        (unless not ``ignored``) the line naming :attr:`ignored_backends`."""
        from harness.check.rendering import render

        self._examination.examined = True
        return render(self, ignored=ignored)
