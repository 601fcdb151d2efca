"""The report's "what the options did": per backend and option of the program checks
(``et.check_program``), delivered exactly, outputs unchanged, effect observed, each
✓/✗ (- where it does not apply), with the cases where one failed; the HTML section and
the terminal's lines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.check.option_outcomes import combine, mark
from harness.results.html_style import esc
from harness.results.records import CaseResult, OptionRecord
from harness.results.summary import where

HEADING = "What the options did"


@dataclass(frozen=True)
class OptionRow:
    """One backend's option over every case that checked a program with it."""

    backend: str
    key: str
    effect: str
    delivered: bool | None
    unchanged: bool | None
    observed: bool | None
    devices: tuple[str, ...]
    failing: tuple[CaseResult, ...]  # the cases where one of the three is ✗

    def marks(self) -> str:
        """``delivered ✓, outputs unchanged ✓, effect observed -``."""
        return (
            f"delivered {mark(self.delivered)}, outputs unchanged {mark(self.unchanged)}, "
            f"effect observed {mark(self.observed)}"
        )


def option_rows(results: Sequence[CaseResult]) -> list[OptionRow]:
    """One row per (backend, option) in the order first met."""
    found: dict[tuple[str, str], list[tuple[CaseResult, OptionRecord]]] = {}
    for result in results:
        for record in result.options:
            found.setdefault((record.backend, record.key), []).append((result, record))
    rows = []
    for (backend, key), seen in found.items():
        records = [record for _, record in seen]
        bad = {id(r): r for r, o in seen if False in (o.delivered, o.unchanged, o.observed)}
        rows.append(
            OptionRow(
                backend,
                key,
                next((o.effect for o in records if o.effect), ""),
                combine(o.delivered for o in records),
                combine(o.unchanged for o in records),
                combine(o.observed for o in records),
                tuple(dict.fromkeys(where(r) for r, _ in seen)),
                tuple(bad.values()),
            )
        )
    return rows


def options_lines(results: Sequence[CaseResult]) -> list[str]:
    """The terminal's lines: one per option, then its failing cases."""
    lines = []
    for row in option_rows(results):
        effect = row.effect or "unjudged"
        lines.append(f"{row.backend} {row.key} ({effect}): {row.marks()}")
        lines += [f"  failed: {r.nodeid} on {where(r)}" for r in row.failing]
    return lines


def options_section(results: Sequence[CaseResult], link: Callable[[CaseResult], str]) -> str:
    """The HTML section ("" when no test checked a program with options); ``link`` makes
    a list item linking to a case."""
    rows = option_rows(results)
    if not rows:
        return ""
    body = [
        "<table><tr><th>backend</th><th>option</th><th>may change</th><th>delivered</th>"
        "<th>outputs unchanged</th><th>effect observed</th><th>devices</th>"
        "<th>failing cases</th></tr>"
    ]
    for row in rows:
        cells = "".join(
            f'<td class="{_style(value)}">{mark(value)}</td>'
            for value in (row.delivered, row.unchanged, row.observed)
        )
        failing = f"<ul>{''.join(link(r) for r in row.failing)}</ul>" if row.failing else ""
        body.append(
            f'<tr class="option"><td class="backend">{esc(row.backend)}</td>'
            f"<td>{esc(row.key)}</td><td>{esc(row.effect or 'unjudged')}</td>{cells}"
            f"<td>{esc(', '.join(row.devices))}</td><td>{failing}</td></tr>"
        )
    return (
        f'<h2 id="options">{HEADING}</h2><p class="muted">Per backend and option of the '
        "program checks: delivered exactly, outputs unchanged (within what the option may "
        "change), its declared effect observed; - where it does not apply or nothing "
        "declares what the option may change.</p>" + "".join(body) + "</table>"
    )


def _style(value: bool | None) -> str:
    return "skipped" if value is None else "passed" if value else "failed"
