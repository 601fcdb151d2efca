"""The text of a verdict: a one-line summary, and the multi-line rendering with sent and
received options aligned side by side (each difference's sentence is
:meth:`~harness.check.differences.Difference.describe`).

Names come from map files and devices: they are shown escaped where they would not read
unambiguously (:func:`~harness.check.wording.show_name`). A verdict
(:class:`harness.check.verdict.Verdict`, whose ``summary()`` and ``render()`` call this
module) is read through :class:`VerdictText`, what the text needs of one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from harness.check.differences import HOOKS, BackendOutcome, Difference, DifferenceKind
from harness.check.wording import count, format_value, key_list, show_name, times
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


class VerdictText(Protocol):
    """What the text reads of a verdict: its request's action, the report, the outcome per
    backend, the report's own differences and the ignored backends."""

    @property
    def action(self) -> Action: ...
    @property
    def report(self) -> Report: ...
    @property
    def backends(self) -> tuple[BackendOutcome, ...]: ...
    @property
    def report_differences(self) -> tuple[Difference, ...]: ...
    @property
    def ignored_backends(self) -> tuple[str, ...]: ...
    @property
    def label(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def differences(self) -> tuple[Difference, ...]: ...


def summary(verdict: VerdictText) -> str:
    """One line: ``load: ok, 2 backends as expected`` or the first few differences."""
    action = verdict.label
    ignored = f"; ignored (not in the program): {key_list(verdict.ignored_backends)}"
    ignored = ignored if verdict.ignored_backends else ""
    if verdict.ok:
        return f"{action}: ok, {count(len(verdict.backends), 'backend')} as expected{ignored}"
    differences = verdict.differences
    shown = [_short(d) for d in differences[:4]]
    if len(differences) > 4:
        shown.append(f"+{len(differences) - 4} more")
    return f"{action}: {count(len(differences), 'difference')}: {'; '.join(shown)}"


def render(verdict: VerdictText, *, ignored: bool = True) -> str:
    """Multi-line text: the report's problems, then each backend's aligned options, then
    (when ``ignored``) :func:`ignored_line`."""
    lines = [_headline(verdict)]
    if verdict.report_differences:
        outcome = verdict.report.outcome.name.lower()
        n = len(verdict.report.entries)
        entries = "1 entry" if n == 1 else f"{n} entries"
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
        f"ignored backends: {key_list(names)} (in the map but not delegates of the program: "
        "the runtime ignores them, which is not a failure)"
    )


def _headline(verdict: VerdictText) -> str:
    action = verdict.label
    if verdict.ok:
        return f"{action} check: ok, {count(len(verdict.backends), 'backend')} as expected"
    failing = sum(1 for b in verdict.backends if not b.ok)
    where = f" in {count(failing, 'backend')}" if failing else ""
    return f"{action} check: {count(len(verdict.differences), 'difference')}{where}"


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
        facts += f", {hook} called {times(entry.calls)}" if entry.is_observed else ""
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
            what = f"{count(len(outcome.expected_options), 'option')} of the requested types"
        else:
            what = f"{count(len(outcome.expected_options), 'option')} exact"
        return [f"backend {show_name(outcome.name)}: ok, {what} ({facts})"]
    differing = count(len(outcome.differences), "difference")
    lines = [f"backend {show_name(outcome.name)}: {differing} ({facts})"]
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
