"""The exactness check: what the host sent against what each backend reported.

:func:`check_load`, :func:`check_set` and :func:`check_get` compare a request's
options map with the device's :class:`~harness.messages.Report` and return a
:class:`Verdict` that names every difference (:class:`DifferenceKind`). Options
are compared strictly: the same key, the same type (``True`` never equals ``1``),
the same value and the same order. ``verdict.raise_for_differences()`` raises
:class:`DeliveryMismatch`, whose message is :meth:`Verdict.render`: per backend,
the sent and received options aligned side by side, differing lines marked.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from wcwidth import wcwidth

from harness.codec.wire import WireErrorCode
from harness.messages import Action, LoadPath, Outcome, Report, ReportEntry
from harness.options import BackendOptions, Option, OptionsMap, OptionValue
from harness.runtime_error import RuntimeErrorCode, describe_status


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


_OPTION_KINDS = frozenset(
    {
        DifferenceKind.MISSING_OPTION,
        DifferenceKind.EXTRA_OPTION,
        DifferenceKind.WRONG_TYPE,
        DifferenceKind.WRONG_VALUE,
        DifferenceKind.MISROUTED,
        DifferenceKind.UNEXPECTED_DELIVERY,
        DifferenceKind.CROSS_MODEL,
    }
)

_HOOKS = {Action.LOAD: "init", Action.SET: "set_option", Action.GET: "get_option"}


@dataclass(frozen=True)
class Difference:
    """One way a report differs from what was expected.

    ``backend`` is None for problems of the report as a whole. ``key`` is the
    option key, or the hook's name (``init``) for call-count kinds.
    """

    kind: DifferenceKind
    backend: str | None
    key: str | None = None
    expected: object = None
    actual: object = None
    belongs_to: tuple[str, ...] = ()
    note: str = ""

    def describe(self, with_backend: bool = True) -> str:
        """One sentence saying what differs, e.g. ``ProbeB: option 'fast': sent ...``."""
        text = self._sentence()
        if self.note and self.kind not in (
            DifferenceKind.UNEXPECTED_ENTRY,
            DifferenceKind.UNEXPECTED_OUTCOME,
        ):
            text += f" ({self.note})"
        return f"{show_name(self.backend)}: {text}" if with_backend and self.backend is not None else text

    def _sentence(self) -> str:
        kind, key, exp, act = self.kind, show_name(self.key or ""), self.expected, self.actual
        match kind:
            case DifferenceKind.MISSING_OPTION:
                return f"option {key} ({format_value(exp)}) was sent but not received"
            case DifferenceKind.EXTRA_OPTION:
                return f"received option {key} ({format_value(act)}), which was not sent to it"
            case DifferenceKind.WRONG_TYPE | DifferenceKind.WRONG_VALUE:
                return f"option {key}: sent {format_value(exp)}, received {format_value(act)}"
            case DifferenceKind.WRONG_ORDER:
                return (
                    f"options arrived in another order: sent [{_key_list(exp)}], "
                    f"received [{_key_list(act)}]"
                )
            case DifferenceKind.MISROUTED:
                owners = " and ".join(map(show_name, self.belongs_to))
                return f"received option {key} ({format_value(act)}), which was sent to {owners}"
            case DifferenceKind.NOTHING_DELIVERED:
                keys = _key_list(o.key for o in exp)
                verb = "was" if len(exp) == 1 else "were"
                return f"received no options; {_count(len(exp), 'option')} {verb} sent: [{keys}]"
            case DifferenceKind.NOT_CALLED:
                return f"{key} was never called (expected {_times(exp)})"
            case DifferenceKind.UNEXPECTED_DELIVERY:
                return (
                    f"received option {key} ({format_value(act)}) although no options were "
                    "sent to it; it must get an empty span"
                )
            case DifferenceKind.WRONG_STATUS:
                return f"status {describe_status(act)}, expected {describe_status(exp)}"
            case DifferenceKind.WRONG_CALL_COUNT:
                return f"{key} called {_times(act)}, expected {_times(exp)}"
            case DifferenceKind.UNEXPECTED_OUTCOME:
                outcome, wanted = act.name.lower(), exp.name.lower()
                return f"report outcome {outcome}, expected {wanted}: {self.note}"
            case DifferenceKind.WRONG_ACTION:
                return f"report answers action {act.name.lower()}, expected {exp.name.lower()}"
            case DifferenceKind.UNEXPECTED_ENTRY:
                return f"has a report entry ({_entry_facts(act)}), but {self.note}"
            case DifferenceKind.DUPLICATE_ENTRY:
                return f"has {act} entries in the report, expected one; only the first is checked"
            case DifferenceKind.MISSING_ENTRY:
                return "has no entry in the report; expected one per backend of the request"
            case DifferenceKind.WRONG_PATH:
                return f"the device served load path {act!r}, the request asked for {exp!r}"
            case DifferenceKind.CROSS_MODEL:
                owners = " and ".join(map(show_name, self.belongs_to))
                own = "" if exp is None else f" instead of its own {format_value(exp)}"
                return (f"received option {key} ({format_value(act)}){own}, which was sent "
                        f"to the same backend in {owners}")
        raise AssertionError(f"unhandled difference kind {kind}")


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
    keys, types and order are compared.
    """

    name: str
    entry: ReportEntry | None
    expected_status: int
    expected_calls: int | None
    expected_options: tuple[Option, ...] | None
    rows: tuple[OptionRow, ...] = ()
    differences: tuple[Difference, ...] = ()
    values_checked: bool = True

    @property
    def ok(self) -> bool:
        return not self.differences


class DeliveryMismatch(AssertionError):
    """The backends did not receive exactly what was sent; the message is the full diff."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(verdict.render())


@dataclass(frozen=True, repr=False)
class Verdict:
    """The result of one check: every difference, per backend and for the report.

    ``ignored_backends`` are map entries for backends that are not delegates of the
    program (LOAD only): the runtime ignores them silently, which is not a failure.
    ``path`` is the load path a LOAD went through (None for SET and GET).
    """

    action: Action
    report: Report
    backends: tuple[BackendOutcome, ...] = ()
    report_differences: tuple[Difference, ...] = ()
    ignored_backends: tuple[str, ...] = ()
    path: LoadPath | None = None

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
        return self.report_differences + tuple(d for b in self.backends for d in b.differences)

    @property
    def ok(self) -> bool:
        return not self.differences

    def backend(self, name: str) -> BackendOutcome | None:
        """The outcome for backend ``name``, or None."""
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
        action = self.label
        ignored = f"; ignored (not in the program): {_key_list(self.ignored_backends)}"
        ignored = ignored if self.ignored_backends else ""
        if self.ok:
            return f"{action}: ok, {_count(len(self.backends), 'backend')} as expected{ignored}"
        shown = [_short(d) for d in self.differences[:4]]
        if len(self.differences) > 4:
            shown.append(f"+{len(self.differences) - 4} more")
        return f"{action}: {_count(len(self.differences), 'difference')}: {'; '.join(shown)}"

    def render(self) -> str:
        """Multi-line text: the report's problems, then each backend's aligned options."""
        lines = [self._headline()]
        if self.report_differences:
            outcome = self.report.outcome.name.lower()
            count = len(self.report.entries)
            entries = "1 entry" if count == 1 else f"{count} entries"
            lines.append(f"report (outcome {outcome}, {entries}):")
            lines += [f"  - {d.describe()}  <- {d.kind.name}" for d in self.report_differences]
        hook = _HOOKS[self.action]
        for outcome in self.backends:
            lines += _render_backend(outcome, self.action, hook)
        if self.ignored_backends:
            lines.append(
                f"ignored backends: {_key_list(self.ignored_backends)} (in the map but not "
                "delegates of the program: the runtime ignores them, which is not a failure)"
            )
        return "\n".join(lines)

    def _headline(self) -> str:
        action = self.label
        if self.ok:
            return f"{action} check: ok, {_count(len(self.backends), 'backend')} as expected"
        failing = sum(1 for b in self.backends if not b.ok)
        where = f" in {_count(failing, 'backend')}" if failing else ""
        return f"{action} check: {_count(len(self.differences), 'difference')}{where}"


# ---- the checks ------------------------------------------------------------------------


def check_load(
    sent: OptionsMap,
    delegates: Sequence[str],
    report: Report,
    *,
    unobserved: Collection[str] = (),
    path: LoadPath = LoadPath.PROGRAM,
) -> Verdict:
    """Check a LOAD report: each delegate's ``init`` got exactly its map entry.

    ``sent`` is the map the delegates must receive (on ``module_both`` the explicit
    one: it replaces the stored map wholly). ``delegates`` are the method's delegate
    ids in program order (duplicates mean one backend is called twice: ``init`` must
    run that often). A delegate with no map entry must receive an empty span.
    ``unobserved`` names delegates served by backends that are not probes, which
    report nothing on LOAD; if they do report, their status is checked. ``path`` is
    the load path asked for; a report naming another (fact ``load_path``) differs.
    """
    strays = [name for name in unobserved if name not in delegates]
    if strays:
        raise ValueError(
            f"unobserved names {strays}, which are not delegates of the program "
            f"{list(delegates)}; fix the test's expectations"
        )
    header = _header_differences(report, Action.LOAD)
    ignored = tuple(b for b in sent.backend_ids if b not in delegates)
    if header:
        return Verdict(Action.LOAD, report, (), header, ignored, path)
    served = report.fact("load_path")
    if served is not None and served != path.label:
        header = (Difference(DifferenceKind.WRONG_PATH, None, None, path.label, served),)

    def why(name: str) -> str:
        if sent.for_backend(name) is not None:
            return "it is in the map, not a delegate of the program: its init should never run"
        return "it is not a delegate of the program"

    entries, entry_differences = _index_entries(report, set(delegates), why)
    outcomes = []
    for name in dict.fromkeys(delegates):
        entry = entries.get(name)
        calls = delegates.count(name)
        if entry is None and name in unobserved:
            outcomes.append(BackendOutcome(name, None, RuntimeErrorCode.Ok, None, None))
            continue
        if entry is None:
            missing = Difference(DifferenceKind.NOT_CALLED, name, "init", calls, 0)
            outcomes.append(
                BackendOutcome(name, None, RuntimeErrorCode.Ok, calls, None, (), (missing,))
            )
            continue
        wanted = sent.for_backend(name)
        outcomes.append(
            _check_entry(
                name,
                entry,
                Action.LOAD,
                expected=wanted.options if wanted is not None else (),
                expected_status=RuntimeErrorCode.Ok,
                expected_calls=calls,
                sent=sent,
            )
        )
    return Verdict(
        Action.LOAD, report, tuple(outcomes), header + entry_differences, ignored, path
    )


def check_set(
    sent: OptionsMap,
    report: Report,
    expected_status: Mapping[str, int] | None = None,
) -> Verdict:
    """Check a SET report: one entry per backend, each probe got exactly its options.

    ``expected_status`` gives the ``Error`` code expected for some backends (e.g.
    ``{"Unregistered": RuntimeErrorCode.NotFound}``); the others must return Ok.
    """
    return _check_calls(Action.SET, sent, report, expected_status or {}, lambda _: None)


def check_get(
    requested: OptionsMap,
    report: Report,
    expected: OptionsMap | None = None,
    expected_status: Mapping[str, int] | None = None,
) -> Verdict:
    """Check a GET report against the values each backend should have filled in.

    For a backend in ``expected`` the returned span must equal its entry there (for
    any entry, probe or not: the span as the call left it is what the host reads).
    For the others only probes are compared, with ``requested``, by key, type and
    order but not value (the values sent are placeholders).
    """
    expected = expected or OptionsMap()
    strays = [b for b in expected.backend_ids if requested.for_backend(b) is None]
    if strays:
        raise ValueError(
            f"expected values for {strays}, which are not in the requested map "
            f"{list(requested.backend_ids)}; add them to the request or drop them"
        )
    return _check_calls(
        Action.GET, requested, report, expected_status or {}, expected.for_backend
    )


def _check_calls(
    action: Action,
    sent: OptionsMap,
    report: Report,
    expected_status: Mapping[str, int],
    expected_for: Callable[[str], BackendOptions | None],
) -> Verdict:
    """SET and GET: the runtime calls each backend of the request once, in order."""
    strays = [name for name in expected_status if sent.for_backend(name) is None]
    if strays:
        raise ValueError(
            f"expected_status names {strays}, which are not in the request "
            f"{list(sent.backend_ids)}; fix the test's expectations"
        )
    header = _header_differences(report, action)
    if header:
        return Verdict(action, report, (), header)
    entries, entry_differences = _index_entries(
        report, set(sent.backend_ids), lambda _: "it is not a backend of the request"
    )
    outcomes = []
    for backend in sent.backends:
        name = backend.backend_id
        status = expected_status.get(name, RuntimeErrorCode.Ok)
        entry = entries.get(name)
        if entry is None:
            missing = Difference(DifferenceKind.MISSING_ENTRY, name)
            outcomes.append(BackendOutcome(name, None, status, None, None, (), (missing,)))
            continue
        explicit = expected_for(name)
        outcomes.append(
            _check_entry(
                name,
                entry,
                action,
                expected=explicit.options if explicit is not None else backend.options,
                expected_status=status,
                expected_calls=1,
                sent=sent,
                values_checked=action is not Action.GET or explicit is not None,
                compare_non_probe=explicit is not None,
            )
        )
    return Verdict(action, report, tuple(outcomes), entry_differences)


def _header_differences(report: Report, action: Action) -> tuple[Difference, ...]:
    if report.action is not action:
        return (Difference(DifferenceKind.WRONG_ACTION, None, None, action, report.action),)
    if report.outcome is not Outcome.OK:
        detail = f"detail {_describe_detail(report.outcome, report.detail)}"
        message = f"message {report.message!r}" if report.message else "no message"
        return (
            Difference(
                DifferenceKind.UNEXPECTED_OUTCOME,
                None,
                None,
                Outcome.OK,
                report.outcome,
                note=f"{detail}, {message}",
            ),
        )
    return ()


def _describe_detail(outcome: Outcome, detail: int) -> str:
    """A report's detail by name: an ExecuTorch ``Error`` or a wire-format error code."""
    if outcome is Outcome.RUNTIME_ERROR:
        return describe_status(detail)
    if outcome is Outcome.REJECTED:
        try:
            return f"{WireErrorCode(detail).name} ({detail}, a wire error)"
        except ValueError:
            return f"{detail} (unknown wire error)"
    return str(detail)


def _index_entries(
    report: Report, allowed: Collection[str], why: Callable[[str], str]
) -> tuple[dict[str, ReportEntry], tuple[Difference, ...]]:
    """The first entry of each expected name, and differences for the others."""
    first: dict[str, ReportEntry] = {}
    differences = []
    for entry in report.entries:
        if entry.name not in allowed:
            if not any(d.backend == entry.name for d in differences):
                differences.append(
                    Difference(
                        DifferenceKind.UNEXPECTED_ENTRY,
                        entry.name,
                        actual=entry,
                        note=why(entry.name),
                    )
                )
        else:
            first.setdefault(entry.name, entry)
    for name, count in Counter(e.name for e in report.entries).items():
        if count > 1:
            differences.append(Difference(DifferenceKind.DUPLICATE_ENTRY, name, None, 1, count))
    return first, tuple(differences)


def _check_entry(
    name: str,
    entry: ReportEntry,
    action: Action,
    *,
    expected: tuple[Option, ...],
    expected_status: int,
    expected_calls: int,
    sent: OptionsMap,
    values_checked: bool = True,
    compare_non_probe: bool = False,
) -> BackendOutcome:
    differences = []
    if entry.status != expected_status:
        differences.append(
            Difference(DifferenceKind.WRONG_STATUS, name, None, expected_status, entry.status)
        )
    if not entry.is_probe and not compare_non_probe:
        return BackendOutcome(name, entry, expected_status, None, None, (), tuple(differences))
    hook = _HOOKS[action]
    if entry.is_probe and entry.calls == 0:
        differences.append(Difference(DifferenceKind.NOT_CALLED, name, hook, expected_calls, 0))
    elif entry.is_probe and entry.calls != expected_calls:
        differences.append(
            Difference(DifferenceKind.WRONG_CALL_COUNT, name, hook, expected_calls, entry.calls)
        )
    others = tuple(b for b in sent.backends if b.backend_id != name)
    rows, option_differences = _align(name, expected, entry.options, others, values_checked)
    return BackendOutcome(
        name,
        entry,
        expected_status,
        expected_calls if entry.is_probe else None,
        expected,
        rows,
        tuple(differences) + option_differences,
        values_checked,
    )


def _align(
    name: str,
    expected: tuple[Option, ...],
    received: tuple[Option, ...],
    others: tuple[BackendOptions, ...],
    values_checked: bool,
) -> tuple[tuple[OptionRow, ...], tuple[Difference, ...]]:
    """Pair sent and received options by key and name what differs about each pair."""
    if expected and not received:
        rows = tuple(OptionRow(i, o, None, None) for i, o in enumerate(expected))
        nothing = Difference(DifferenceKind.NOTHING_DELIVERED, name, None, tuple(expected), ())
        return rows, (nothing,)
    if values_checked and expected == received:  # the usual case: exact delivery
        return tuple(OptionRow(i, o, i, o) for i, o in enumerate(received)), ()
    unused = dict(enumerate(received))
    by_key: dict[str, list[int]] = {}
    for j, got in enumerate(received):
        by_key.setdefault(got.key, []).append(j)
    rows = []
    for i, option in enumerate(expected):
        candidates = by_key.get(option.key)
        j = candidates.pop(0) if candidates else None
        if j is None:
            missing = Difference(DifferenceKind.MISSING_OPTION, name, option.key, option.value)
            rows.append(OptionRow(i, option, None, None, missing))
            continue
        got = unused.pop(j)
        rows.append(OptionRow(i, option, j, got, _compare(name, option, got, values_checked)))
    sent_keys = {o.key for o in expected}
    for j, got in unused.items():
        owners = tuple(b.backend_id for b in others if any(_same(o, got) for o in b.options))
        if owners:
            kind = DifferenceKind.MISROUTED
        elif expected:
            kind = DifferenceKind.EXTRA_OPTION
        else:
            kind = DifferenceKind.UNEXPECTED_DELIVERY
        note = "a second option with this key" if got.key in sent_keys else ""
        difference = Difference(kind, name, got.key, None, got.value, owners, note)
        rows.append(OptionRow(None, None, j, got, difference))
    differences = [r.difference for r in rows if r.difference is not None]
    paired = [r for r in rows if r.sent is not None and r.received is not None]
    if [r.received_index for r in paired] != sorted(r.received_index for r in paired):
        keys_sent = tuple(o.key for o in expected)
        keys_received = tuple(o.key for o in received)
        differences.append(
            Difference(DifferenceKind.WRONG_ORDER, name, None, keys_sent, keys_received)
        )
    return tuple(rows), tuple(differences)


def _compare(name: str, sent: Option, got: Option, values_checked: bool) -> Difference | None:
    if type(sent.value) is not type(got.value):
        return Difference(DifferenceKind.WRONG_TYPE, name, sent.key, sent.value, got.value)
    if values_checked and sent.value != got.value:
        return Difference(DifferenceKind.WRONG_VALUE, name, sent.key, sent.value, got.value)
    return None


def _same(a: Option, b: Option) -> bool:
    """Equal key, type and value: ``True`` is not ``1``."""
    return a.key == b.key and type(a.value) is type(b.value) and a.value == b.value


# ---- rendering -------------------------------------------------------------------------

_CELL_WIDTH = 44  # longer cells are cut; the full values follow on a line of their own
_GAP = 4


def format_value(value: OptionValue | object) -> str:
    """``bool true``, ``int 4``, ``string 'perf'``: the type is always shown."""
    if type(value) is bool:
        return f"bool {'true' if value else 'false'}"
    if type(value) is int:
        return f"int {value}"
    if type(value) is str:
        return f"string {value!r}"
    return f"{type(value).__name__} {value!r}"


def show_name(name: str) -> str:
    """A key or backend id as is when it reads unambiguously, else its repr.

    Names come from map files and devices: control characters (terminal escapes),
    bidi overrides and line separators are shown escaped, never sent to the terminal.
    """
    return name if name and name.isprintable() and name.strip() == name else repr(name)


def _key_list(keys: Iterable[str]) -> str:
    return ", ".join(show_name(k) for k in keys)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _times(n: object) -> str:
    return "once" if n == 1 else f"{n} times"


def _entry_facts(entry: object) -> str:
    if not isinstance(entry, ReportEntry):
        return repr(entry)
    probe = "probe" if entry.is_probe else "not a probe"
    return (
        f"status {describe_status(entry.status)}, {_count(entry.calls, 'call')}, "
        f"{_count(len(entry.options), 'option')}, {probe}"
    )


def _short(difference: Difference) -> str:
    where = show_name(difference.backend) if difference.backend else "report"
    key = f" {show_name(difference.key)}" if difference.kind in _OPTION_KINDS else ""
    return f"{where} {difference.kind.name}{key}"


def _width(text: str) -> int:
    """Terminal columns ``text`` takes (wide East Asian characters count two)."""
    return sum(max(wcwidth(c), 0) for c in text)


def _fit(text: str, width: int) -> tuple[str, bool]:
    """``text`` cut to ``width`` columns (ending in an ellipsis), and whether it was cut."""
    if _width(text) <= width:
        return text, False
    kept, used = [], 0
    for char in text:
        used += max(wcwidth(char), 0)
        if used > width - 1:
            break
        kept.append(char)
    return "".join(kept) + "…", True


def _pad(text: str, width: int) -> str:
    return text + " " * (width - _width(text))


def _cell(index: int | None, option: Option | None) -> str:
    if option is None:
        return ""
    return f"[{index}] {show_name(option.key)}: {format_value(option.value)}"


def _marker(difference: Difference) -> str:
    if difference.kind in (DifferenceKind.MISROUTED, DifferenceKind.CROSS_MODEL):
        sent_to = " and ".join(map(show_name, difference.belongs_to))
        return f"<- {difference.kind.name} (sent to {sent_to})"
    if difference.note:
        return f"<- {difference.kind.name} ({difference.note})"
    return f"<- {difference.kind.name}"


def _render_backend(outcome: BackendOutcome, action: Action, hook: str) -> list[str]:
    entry = outcome.entry
    if entry is None and not outcome.differences:
        quiet = f"not a probe, reports nothing on {action.name.lower()}"
        return [f"backend {show_name(outcome.name)}: not observed ({quiet})"]
    facts = "no entry in the report"
    if entry is not None:
        facts = f"status {describe_status(entry.status)}"
        facts += f", {hook} called {_times(entry.calls)}" if entry.is_probe else ", not a probe"
    if outcome.ok:
        if outcome.expected_options is None:
            what = "options not observable"
        elif not outcome.expected_options:
            what = "no options, as expected"
        elif not outcome.values_checked:
            what = f"{_count(len(outcome.expected_options), 'option')} of the requested types"
        else:
            what = f"{_count(len(outcome.expected_options), 'option')} exact"
        return [f"backend {show_name(outcome.name)}: ok, {what} ({facts})"]
    lines = [f"backend {show_name(outcome.name)}: {_count(len(outcome.differences), 'difference')} ({facts})"]
    if outcome.expected_options is not None:
        lines += _render_table(outcome, action)
    row_differences = {id(r.difference) for r in outcome.rows if r.difference is not None}
    lines += [
        f"  - {d.describe(with_backend=False)}  <- {d.kind.name}"
        for d in outcome.differences
        if id(d) not in row_differences
    ]
    return lines


def _render_table(outcome: BackendOutcome, action: Action) -> list[str]:
    if action is Action.GET:
        left = "expected" if outcome.values_checked else "requested (values not compared)"
        right = "returned"
    else:
        left, right = "sent", "received"
    if not outcome.rows:
        return [f"    {left}: nothing    {right}: nothing"]
    cells = []
    for row in outcome.rows:
        sent, sent_cut = _fit(_cell(row.sent_index, row.sent), _CELL_WIDTH)
        got, got_cut = _fit(_cell(row.received_index, row.received), _CELL_WIDTH)
        if row.sent is not None and row.received is None and row.difference is not None:
            got = "(missing)"
        cells.append((row, sent, got, sent_cut or got_cut))
    left_width = max([_width(left)] + [_width(s) for _, s, _, _ in cells]) + _GAP
    right_width = max([_width(right)] + [_width(g) for _, _, g, _ in cells]) + _GAP
    lines = [f"    {_pad(left, left_width)}{right}"]
    for row, sent, got, cut in cells:
        if row.difference is None:
            lines.append(f"    {_pad(sent, left_width)}{got}".rstrip())
            continue
        marker = _marker(row.difference)
        lines.append(f"  - {_pad(sent, left_width)}{_pad(got, right_width)}{marker}")
        if cut:
            lines.append(f"      in full: {row.difference.describe(with_backend=False)}")
    return lines
