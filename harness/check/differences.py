"""What differs: one difference (:class:`Difference`, its :class:`DifferenceKind` and its
sentence, :meth:`Difference.describe`) and per backend (:class:`BackendOutcome`, the sent
and received options paired in :class:`OptionRow`).

A whole report's verdict is :mod:`harness.check.verdict`'s; its text,
:mod:`harness.check.rendering`'s.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypeAlias

from harness.check.wording import count, format_value, key_list, show_name, times
from harness.data.messages import Action, Outcome, ReportEntry
from harness.data.options import Option, OptionValue
from harness.data.runtime_error import describe_status


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
        text = _sentence(self)
        if self.note and self.kind not in (
            DifferenceKind.UNEXPECTED_ENTRY,
            DifferenceKind.UNEXPECTED_OUTCOME,
        ):
            text += f" ({self.note})"
        if with_backend and self.backend is not None:
            return f"{show_name(self.backend)}: {text}"
        return text


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


@dataclass(frozen=True)
class _Words:
    """How an option difference names its two ends: what went to the backend against what
    it received (load, set), or what a GET expected against what it returned."""

    given: str
    got: str
    given_to: str
    arrived: str


_DELIVERED = _Words("sent", "received", "sent to", "arrived")
_RETURNED = _Words("expected", "returned", "asked of", "returned")


def _sentence(difference: Difference) -> str:
    sentence = (
        _option_sentence(difference) or _call_sentence(difference) or _report_sentence(difference)
    )
    if sentence is None:
        raise AssertionError(f"unhandled difference kind {difference.kind}")
    return sentence


def _option_sentence(difference: Difference) -> str | None:
    """A difference in the options delivered or returned, or None."""
    kind, key = difference.kind, show_name(difference.key or "")
    exp, act = difference.expected, difference.actual
    w = _RETURNED if difference.returned else _DELIVERED
    match kind:
        case DifferenceKind.MISSING_OPTION:
            return f"option {key} ({format_value(exp)}) was {w.given} but not {w.got}"
        case DifferenceKind.EXTRA_OPTION:
            return f"{w.got} option {key} ({format_value(act)}), which was not {w.given_to} it"
        case DifferenceKind.WRONG_TYPE | DifferenceKind.WRONG_VALUE:
            return f"option {key}: {w.given} {format_value(exp)}, {w.got} {format_value(act)}"
        case DifferenceKind.WRONG_ORDER:
            return (
                f"options {w.arrived} in another order: {w.given} [{key_list(_keys(exp))}], "
                f"{w.got} [{key_list(_keys(act))}]"
            )
        case DifferenceKind.MISROUTED:
            owners = " and ".join(map(show_name, difference.belongs_to))
            return f"{w.got} option {key} ({format_value(act)}), which was {w.given_to} {owners}"
        case DifferenceKind.NOTHING_DELIVERED:
            keys = _keys(exp)
            verb = "was" if len(keys) == 1 else "were"
            return (
                f"{w.got} no options; {count(len(keys), 'option')} {verb} {w.given}: "
                f"[{key_list(keys)}]"
            )
        case DifferenceKind.UNEXPECTED_DELIVERY:
            return (
                f"{w.got} option {key} ({format_value(act)}) although no options were "
                f"{w.given_to} it; it must get an empty span"
            )
        case DifferenceKind.CROSS_MODEL:
            owners = " and ".join(map(show_name, difference.belongs_to))
            own = "" if exp is None else f" instead of its own {format_value(exp)}"
            return (
                f"received option {key} ({format_value(act)}){own}, which was sent "
                f"to the same backend in {owners}"
            )
    return None


def _call_sentence(difference: Difference) -> str | None:
    """A difference in a backend's calls, their statuses and records, or None."""
    kind, key = difference.kind, show_name(difference.key or "")
    exp, act = difference.expected, difference.actual
    match kind:
        case DifferenceKind.NOT_CALLED:
            return f"{key} was never called (expected {times(exp)})"
        case DifferenceKind.WRONG_STATUS:
            return f"status {_status(act)}, expected {_status(exp)}"
        case DifferenceKind.WRONG_CALL_COUNT:
            return f"{key} called {times(act)}, expected {times(exp)}"
        case DifferenceKind.NOT_RECORDED if key == HOOKS[Action.GET]:
            return (
                f"its records of {key} lack the caller's end (etb.caller: what the runtime "
                "handed back to its caller); rebuild the agent from this harness"
            )
        case DifferenceKind.NOT_RECORDED:
            return (
                f"has a report entry without records ({_entry_facts(act)}), although the "
                "device announces it as recorded (HELLO fact 'recorded')"
            )
        case DifferenceKind.CHANGED_ON_RETURN:
            left = "nothing" if exp is None else format_value(exp)
            handed = "nothing" if act is None else format_value(act)
            return (
                f"option {key}: the backend's get_option left {left}, but the runtime "
                f"handed {handed} back to its caller"
            )
        case DifferenceKind.BACKEND_STATUS:
            return (
                f"the backend's own {key} returned {_status(exp)}, but the runtime "
                f"reported {_status(act)}"
            )
        case DifferenceKind.NO_SUCH_BACKEND:
            if exp is None:
                answer = "no delegate of the program, so the runtime ignores its entry of the map"
            else:
                answer = f"{key} returned {_status(act)}, expected {_status(exp)}"
            return (
                f"the device has no backend of this name, and the harness registered no probe "
                f"under it: {answer} (a misspelled id? a probe: declare it, probes= or "
                "--probe NAME)"
            )
    return None


def _report_sentence(difference: Difference) -> str | None:
    """A difference in the report itself (outcome, action, entries, path), or None."""
    exp, act = difference.expected, difference.actual
    match difference.kind:
        case DifferenceKind.UNEXPECTED_OUTCOME:
            outcome, wanted = _enum_name(act), _enum_name(exp)
            return f"report outcome {outcome}, expected {wanted}: {difference.note}"
        case DifferenceKind.WRONG_ACTION:
            return f"report answers action {_enum_name(act)}, expected {_enum_name(exp)}"
        case DifferenceKind.UNEXPECTED_ENTRY:
            return f"has a report entry ({_entry_facts(act)}), but {difference.note}"
        case DifferenceKind.DUPLICATE_ENTRY:
            return f"has {act} entries in the report, expected one; only the first is checked"
        case DifferenceKind.MISSING_ENTRY:
            return "has no entry in the report; expected one per backend of the request"
        case DifferenceKind.WRONG_PATH:
            return f"the device served load path {act!r}, the request asked for {exp!r}"
    return None


def _keys(value: DifferenceValue) -> tuple[str, ...]:
    """The option keys a WRONG_ORDER (keys) or NOTHING_DELIVERED (options) value holds."""
    if not isinstance(value, tuple):
        return ()
    return tuple(item.key if isinstance(item, Option) else item for item in value)


def _status(value: DifferenceValue) -> str:
    """An ExecuTorch ``Error`` code by name."""
    return describe_status(value) if isinstance(value, int) else repr(value)


def _enum_name(value: DifferenceValue) -> str:
    """An action or outcome as the readable form writes it: ``load``, ``ok``."""
    return value.name.lower() if isinstance(value, enum.Enum) else repr(value)


def _entry_facts(entry: DifferenceValue) -> str:
    if not isinstance(entry, ReportEntry):
        return repr(entry)
    probe = "probe" if entry.is_probe else "recorded" if entry.is_recorded else "not a probe"
    return (
        f"status {describe_status(entry.status)}, {count(entry.calls, 'call')}, "
        f"{count(len(entry.delivered), 'option')}, {probe}"
    )
