"""The text of a verdict: one sentence per difference, a one-line summary, and the
multi-line rendering with sent and received options aligned side by side.

Names come from map files and devices: :func:`show_name` escapes any that would not
read unambiguously on a terminal.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from harness.check.verdict import (
    HOOKS,
    BackendOutcome,
    Difference,
    DifferenceKind,
    DifferenceValue,
    Verdict,
)
from harness.data.messages import Action, Report, ReportEntry
from harness.data.options import Option
from harness.data.runtime_error import RuntimeErrorCode, describe_status

_OPTION_KINDS = frozenset(
    {
        DifferenceKind.MISSING_OPTION,
        DifferenceKind.EXTRA_OPTION,
        DifferenceKind.WRONG_TYPE,
        DifferenceKind.WRONG_VALUE,
        DifferenceKind.MISROUTED,
        DifferenceKind.UNEXPECTED_DELIVERY,
        DifferenceKind.CROSS_MODEL,
        DifferenceKind.CHANGED_ON_RETURN,
    }
)
_CELL_WIDTH = 44  # longer cells are cut; the full values follow on a line of their own
_GAP = 4


def describe(difference: Difference, with_backend: bool = True) -> str:
    """One sentence saying what differs, e.g. ``ProbeB: option 'fast': sent ...``."""
    text = _sentence(difference)
    if difference.note and difference.kind not in (
        DifferenceKind.UNEXPECTED_ENTRY,
        DifferenceKind.UNEXPECTED_OUTCOME,
    ):
        text += f" ({difference.note})"
    if with_backend and difference.backend is not None:
        return f"{show_name(difference.backend)}: {text}"
    return text


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
                f"options {w.arrived} in another order: {w.given} [{_key_list(_keys(exp))}], "
                f"{w.got} [{_key_list(_keys(act))}]"
            )
        case DifferenceKind.MISROUTED:
            owners = " and ".join(map(show_name, difference.belongs_to))
            return f"{w.got} option {key} ({format_value(act)}), which was {w.given_to} {owners}"
        case DifferenceKind.NOTHING_DELIVERED:
            keys = _keys(exp)
            verb = "was" if len(keys) == 1 else "were"
            return (
                f"{w.got} no options; {_count(len(keys), 'option')} {verb} {w.given}: "
                f"[{_key_list(keys)}]"
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
            return f"{key} was never called (expected {_times(exp)})"
        case DifferenceKind.WRONG_STATUS:
            return f"status {_status(act)}, expected {_status(exp)}"
        case DifferenceKind.WRONG_CALL_COUNT:
            return f"{key} called {_times(act)}, expected {_times(exp)}"
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


def summary(verdict: Verdict) -> str:
    """One line: ``load: ok, 2 backends as expected`` or the first few differences."""
    action = verdict.label
    ignored = f"; ignored (not in the program): {_key_list(verdict.ignored_backends)}"
    ignored = ignored if verdict.ignored_backends else ""
    if verdict.ok:
        return f"{action}: ok, {_count(len(verdict.backends), 'backend')} as expected{ignored}"
    differences = verdict.differences
    shown = [_short(d) for d in differences[:4]]
    if len(differences) > 4:
        shown.append(f"+{len(differences) - 4} more")
    return f"{action}: {_count(len(differences), 'difference')}: {'; '.join(shown)}"


def render(verdict: Verdict, *, ignored: bool = True) -> str:
    """Multi-line text: the report's problems, then each backend's aligned options, then
    (when ``ignored``) :func:`ignored_line`."""
    lines = [_headline(verdict)]
    if verdict.report_differences:
        outcome = verdict.report.outcome.name.lower()
        count = len(verdict.report.entries)
        entries = "1 entry" if count == 1 else f"{count} entries"
        lines.append(f"report (outcome {outcome}, {entries}):")
        lines += [f"  - {d.describe()}  <- {d.kind.name}" for d in verdict.report_differences]
    hook = HOOKS[verdict.action]
    for backend in verdict.backends:
        lines += _render_backend(backend, verdict.action, hook)
    if verdict.ignored_backends and ignored:
        lines.append(ignored_line(verdict.ignored_backends))
    return "\n".join(lines)


def ignored_line(names: Iterable[str]) -> str:
    """The line naming a load's ignored backends: map entries that are no delegates."""
    return (
        f"ignored backends: {_key_list(names)} (in the map but not delegates of the program: "
        "the runtime ignores them, which is not a failure)"
    )


def _headline(verdict: Verdict) -> str:
    action = verdict.label
    if verdict.ok:
        return f"{action} check: ok, {_count(len(verdict.backends), 'backend')} as expected"
    failing = sum(1 for b in verdict.backends if not b.ok)
    where = f" in {_count(failing, 'backend')}" if failing else ""
    return f"{action} check: {_count(len(verdict.differences), 'difference')}{where}"


def returned_lines(report: Report) -> list[str]:
    """What a GET returned, per backend of ``report`` and per key, value and type: the
    span as the runtime handed it back (a recorded entry's caller end), else as reported."""
    lines = ["returned by get_option:"]
    for entry in report.entries:
        returned = entry.caller_received
        if returned is None:
            returned = entry.delivered
        status = "" if entry.status == 0 else f" (status {describe_status(entry.status)})"
        if entry.status == RuntimeErrorCode.NotFound:  # no backend filled the span in
            lines.append(f"  {show_name(entry.name)}{status}: nothing, no such backend")
            continue
        if not returned:
            lines.append(f"  {show_name(entry.name)}{status}: no options")
            continue
        lines.append(f"  {show_name(entry.name)}{status}:")
        width = max(_width(show_name(o.key)) for o in returned)
        lines += [
            f"    {_pad(show_name(o.key) + ':', width + 2)}{format_value(o.value)}"
            for o in returned
        ]
    if not report.entries:
        lines.append("  nothing: the report has no entries")
    return lines


def format_value(value: object) -> str:
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


def _times(n: DifferenceValue) -> str:
    return "once" if n == 1 else f"{n} times"


def _entry_facts(entry: DifferenceValue) -> str:
    if not isinstance(entry, ReportEntry):
        return repr(entry)
    probe = "probe" if entry.is_probe else "recorded" if entry.is_recorded else "not a probe"
    return (
        f"status {describe_status(entry.status)}, {_count(entry.calls, 'call')}, "
        f"{_count(len(entry.delivered), 'option')}, {probe}"
    )


def _short(difference: Difference) -> str:
    where = show_name(difference.backend) if difference.backend else "report"
    key = f" {show_name(difference.key or '')}" if difference.kind in _OPTION_KINDS else ""
    return f"{where} {difference.kind.name}{key}"


def _width(text: str) -> int:
    """Terminal columns ``text`` takes (wide East Asian characters count two)."""
    if text.isascii() and text.isprintable():
        return len(text)  # the common case, one column each, without a lookup per character
    return sum(_char_width(c) for c in text)


def _char_width(char: str) -> int:
    from wcwidth import wcwidth  # only for text not plain ASCII: its import costs 20 ms

    return max(wcwidth(char), 0)


def _fit(text: str, width: int) -> tuple[str, bool]:
    """``text`` cut to ``width`` columns (ending in an ellipsis), and whether it was cut."""
    if _width(text) <= width:
        return text, False
    kept, used = [], 0
    for char in text:
        used += _char_width(char)
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
        facts += f", {hook} called {_times(entry.calls)}" if entry.is_observed else ""
        facts += _who(entry, outcome.absent)
    elif outcome.absent:
        facts = "no such backend on the device"
    if outcome.ok:
        if outcome.absent:
            what = "as expected"
        elif outcome.expected_options is None:
            what = "options not observable"
        elif not outcome.expected_options:
            what = "no options, as expected"
        elif not outcome.values_checked:
            what = f"{_count(len(outcome.expected_options), 'option')} of the requested types"
        else:
            what = f"{_count(len(outcome.expected_options), 'option')} exact"
        return [f"backend {show_name(outcome.name)}: ok, {what} ({facts})"]
    count = _count(len(outcome.differences), "difference")
    lines = [f"backend {show_name(outcome.name)}: {count} ({facts})"]
    if outcome.expected_options is not None:
        lines += _render_table(outcome, action)
    row_differences = {id(r.difference) for r in outcome.rows if r.difference is not None}
    lines += [
        f"  - {d.describe(with_backend=False)}  <- {d.kind.name}"
        for d in outcome.differences
        if id(d) not in row_differences
    ]
    return lines


def _who(entry: ReportEntry, absent: bool) -> str:
    """Whose entry it is: a probe the harness registered, a real backend (recorded or not),
    or no backend at all."""
    if entry.is_probe:
        return ", probe registered by the harness"
    if entry.is_recorded:
        return ", recorded real backend"
    return ", no such backend on the device" if absent else ", not a probe"


def _render_table(outcome: BackendOutcome, action: Action) -> list[str]:
    if action is Action.GET:
        left = "expected" if outcome.values_checked else "requested (values not compared)"
        recorded = outcome.entry is not None and outcome.entry.is_recorded
        right = "left by the backend" if recorded else "returned"
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
