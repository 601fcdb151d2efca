"""One self-contained HTML file for a run (or many merged runs): no scripts, no external assets.

The first screen is the answer: the matrix, one column per device (per device and
runtime in a run across runtimes) and per suite a row of test outcomes and a row per
backend and route its verdicts checked (route: the load path, ``program``, ``module``,
``module_method``, ``module_both``, or ``set`` / ``get``), failures first; then the
tests that did not pass, each with its first differences. Below come the checks that
differ across runtimes, the run's history (what changed since the last run, the trend
charts), the devices (facts, outcome counts, quarantine reasons), and every cell's and
case's details: outcome, infrastructure error and failed tries, every verdict's summary
and, where options differed, the rendered diff (:meth:`harness.check.Verdict.render`),
the failure text, agent stderr and crash artifacts.
"""

from __future__ import annotations

import collections
import datetime
import html
import os
from collections.abc import Sequence
from pathlib import Path

from harness.results.records import CaseResult
from harness.results.summary import (
    ROUTES,
    across_runtimes,
    devices_in_order,
    outcome_counts,
    quarantined_devices,
    where,
)

# Worst first: a cell takes the colour of its worst outcome.
_SEVERITY = ("failed", "error", "xpassed", "infra", "passed", "xfailed", "skipped")
_NOT_PASSED = ("failed", "error", "infra", "xpassed")
_WHY_LINES = 3  # differences shown beside a test that did not pass
_SHOWN = ("passed", "failed", "error", "infra", "skipped", "xfailed", "xpassed")
_LETTER = {
    "passed": "✓",
    "failed": "✗",
    "error": "E",
    "infra": "I",
    "skipped": "s",
    "xfailed": "x",
    "xpassed": "X",
}

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.suite th { background: #e6e6f0; }
td.backend { padding-left: 1.8em; font-family: monospace; }
a { color: inherit; }
.failed, .error, .xpassed { background: #f6c9c9; }
.infra { background: #fbe3a8; }
.passed { background: #cdeccd; }
.skipped, .xfailed { background: #e4e4e4; }
.none { background: #fff; color: #999; }
.badge { display: inline-block; min-width: 4.5em; padding: 0 .4em; border-radius: 3px;
         text-align: center; font-size: .85em; font-weight: 600; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: .6em; overflow-x: auto;
      white-space: pre; font-size: 12px; }
section.case { border-top: 1px solid #ddd; padding: .4em 0; }
section.case:target, section.cell:target { outline: 3px solid #6b8de3; }
.muted { color: #777; }
ul.why { font-family: monospace; font-size: 12px; margin: .1em 0 .4em; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def html_page(title: str, body: str) -> str:
    """A self-contained HTML document in the report's style: ``title`` and ``body`` (HTML)."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
            f"<h1>{_e(title)}</h1>",
            body,
            "</body></html>",
        ]
    )


def _worst(outcomes: collections.Counter) -> str:
    return next((o for o in _SEVERITY if outcomes[o]), "none")


def _counts_text(outcomes: collections.Counter) -> str:
    return " ".join(f"{_LETTER[o]}{outcomes[o]}" for o in _SHOWN if outcomes[o])


def _why(result: CaseResult) -> list[str]:
    """The first :data:`_WHY_LINES` differences of a result, else its infrastructure cause
    or pytest's first ``E`` line."""
    lines = [d for v in result.verdicts for d in v.differences]
    if not lines and result.infra:
        lines = [f"{result.infra.type}: {result.infra.message}"]
    if not lines:
        lines = result.error_lines
    shown = [line[:300] for line in lines[:_WHY_LINES]]
    if len(lines) > _WHY_LINES:
        shown.append(f"... and {len(lines) - _WHY_LINES} more")
    return shown


def _badge(outcome: str) -> str:
    return f'<span class="badge {_e(outcome)}">{_e(outcome)}</span>'


class _Page:
    """Builds the report; ids are numbers so that any test or backend name is safe."""

    def __init__(
        self, results: Sequence[CaseResult], title: str, artifacts_prefix: str, appendix: str
    ) -> None:
        self.results = list(results)
        self.appendix = appendix
        self.title = title
        self.artifacts_prefix = artifacts_prefix
        self.devices = devices_in_order(self.results)
        self.suites = list(dict.fromkeys(r.suite for r in self.results))
        self.case_id = {id(r): f"c{n}" for n, r in enumerate(self.results)}
        self.runs = sorted({r.run for r in self.results if r.run})
        # Each cell's cases, and each suite's, found once: a run of many devices has
        # thousands of results, and the matrix asks for every suite x device x backend.
        self._by_cell: dict[tuple[str, str], list[CaseResult]] = collections.defaultdict(list)
        self._by_suite: dict[str, list[CaseResult]] = collections.defaultdict(list)
        for r in self.results:
            self._by_cell[r.suite, where(r)].append(r)
            self._by_suite[r.suite].append(r)
        self._backends = {suite: self._backends_of(suite) for suite in self.suites}

    def render(self) -> str:
        """The answer first: the matrix (failures first) and the tests that did not pass,
        with their differences; then the runtimes side by side, the history (what
        changed, the trends), the devices, and every cell and case."""
        parts = [
            self._overview(),
            "<h2>Matrix: suites and backends by device</h2>",
            '<p class="muted">Failures first. Suite rows count tests (✓ passed, ✗ failed, '
            "E error, I infrastructure error, s skipped); backend rows count option checks "
            "(exact / all). Click a cell for its cases.</p>",
            self._matrix(),
            self._not_passed(),
            self._across_runtimes(),
            self.appendix,
            self._devices(),
            "<h2>Cells</h2>",
            self._cells(),
            "<h2>Cases</h2>",
            *(self._case(r) for r in self.results),
        ]
        return html_page(self.title, "\n".join(parts))

    def _overview(self) -> str:
        total = collections.Counter(r.outcome for r in self.results)
        when = datetime.datetime.now().isoformat(timespec="seconds")
        runs = f"; runs: {', '.join(self.runs)}" if self.runs else ""
        devices = {r.device for r in self.results if r.device}
        labels = dict.fromkeys(r.runtime_label for r in self.results if r.runtime_label)
        runtimes = f" x {len(labels)} runtime(s) ({', '.join(labels)})" if labels else ""
        bad = sum(total[o] for o in _NOT_PASSED)
        jump = f' <a href="#not-passed">{bad} not passed: why</a>.' if bad else ""
        return (
            f"<p>{len(self.results)} tests on "
            f"{len(devices)} device(s){_e(runtimes)}: "
            f"{_e(', '.join(f'{n} {o}' for o, n in total.most_common()))}.{jump} "
            f'<span class="muted">Generated {when}{_e(runs)}.</span></p>'
        )

    def _devices(self) -> str:
        counts = outcome_counts(self.results)
        quarantined = quarantined_devices(self.results)
        facts: dict[str, dict[str, str]] = {}
        for r in self.results:
            if r.facts:
                facts.setdefault(where(r), dict(r.facts))
        rows = []
        for device in self.devices:
            c, f = counts[device], facts.get(device, {})
            rows.append(
                f'<tr><th class="{_worst(c)}">{_e(device)}</th>'
                f"<td>{_e(f.get('abi', ''))}</td><td>{_e(f.get('runtime', ''))}</td>"
                f"<td>{_e(f.get('agent_version', ''))}</td>"
                + "".join(f'<td class="num">{c[o]}</td>' for o in _SHOWN)
                + f"<td>{_e(quarantined.get(device, ''))}</td></tr>"
            )
        head = "".join(f"<th>{o}</th>" for o in _SHOWN)
        return (
            "<h2>Devices</h2><table><tr><th>device</th><th>ABI</th><th>runtime</th>"
            f"<th>agent</th>{head}<th>quarantined</th></tr>{''.join(rows)}</table>"
        )

    def _across_runtimes(self) -> str:
        """Side by side, the checks that are not the same on every runtime (``--runtime``)."""
        labels, differing, agreeing = across_runtimes(self.results)
        if len(labels) < 2:
            return ""
        head = "".join(f"<th>{_e(label)}</th>" for label in labels)
        rows = []
        for check, device, on in differing:
            cells = []
            for label in labels:
                r = on.get(label)
                if r is None:
                    cells.append('<td class="none">not run</td>')
                    continue
                first = next((d for v in r.verdicts for d in v.differences), "")
                note = f'<br><span class="muted">{_e(first[:160])}</span>' if first else ""
                cells.append(
                    f'<td class="{_e(r.outcome)}"><a href="#{self.case_id[id(r)]}">'
                    f"{_e(r.outcome)}</a>{note}</td>"
                )
            rows.append(f"<tr><th>{_e(check)}</th><td>{_e(device)}</td>{''.join(cells)}</tr>")
        table = (
            f"<table><tr><th>check</th><th>device</th>{head}</tr>{''.join(rows)}</table>"
            if rows
            else ""
        )
        return (
            f"<h2>Across runtimes: {len(differing)} check(s) differ</h2>"
            f'<p class="muted">{agreeing} check(s) have the same outcome and differences on '
            f"every runtime ({_e(', '.join(labels))}).</p>{table}"
        )

    def _backends_of(self, suite: str) -> list[tuple[str, str]]:
        """(backend, route) pairs the suite's verdicts checked: route is the load path
        (program, module, ...) or set / get, so rows are path x backend."""
        pairs: dict[tuple[str, str], int] = {}  # in order of first appearance
        for r in self._by_suite.get(suite, []):
            for verdict in r.verdicts:
                for name, _ in verdict.backends:
                    pairs.setdefault((name, verdict.route), len(pairs))
        order = {route: i for i, route in enumerate(ROUTES)}
        return sorted(pairs, key=lambda p: (order.get(p[1], len(order)), pairs[p]))

    @staticmethod
    def _checks(result: CaseResult, pair: tuple[str, str]) -> list[bool]:
        backend, route = pair
        return [
            ok
            for v in result.verdicts
            if v.route == route
            for name, ok in v.backends
            if name == backend
        ]

    def _failing(self, results: Sequence[CaseResult]) -> int:
        return sum(1 for r in results if r.outcome in _NOT_PASSED)

    def _inexact(self, suite: str, pair: tuple[str, str]) -> int:
        return sum(
            1 for r in self._by_suite.get(suite, []) for ok in self._checks(r, pair) if not ok
        )

    def _matrix(self) -> str:
        """Suites and their backend rows with the most failures first (the devices keep
        their order: a run across runtimes shows them side by side); the ids of the cells
        they link to stay those of :meth:`_cells`."""
        devices = list(enumerate(self.devices))
        suites = sorted(enumerate(self.suites), key=lambda s: -self._failing(self._by_suite[s[1]]))
        head = "".join(f"<th>{_e(d)}</th>" for _, d in devices)
        rows = [f"<table><tr><th>suite / backend via path</th>{head}</tr>"]
        for s, suite in suites:
            cells = []
            for d, device in devices:
                outcomes = collections.Counter(r.outcome for r in self._cases(suite, device))
                if not outcomes:
                    cells.append('<td class="none">-</td>')
                    continue
                cells.append(
                    f'<td class="{_worst(outcomes)}"><a href="#s{s}d{d}">'
                    f"{_e(_counts_text(outcomes))}</a></td>"
                )
            rows.append(f'<tr class="suite"><th>{_e(suite)}</th>{"".join(cells)}</tr>')
            pairs = sorted(
                enumerate(self._backends[suite]), key=lambda p: -self._inexact(suite, p[1])
            )
            for b, pair in pairs:
                cells = []
                for d, device in devices:
                    checks = [
                        ok for r in self._cases(suite, device) for ok in self._checks(r, pair)
                    ]
                    if not checks:
                        cells.append('<td class="none">-</td>')
                        continue
                    exact = sum(checks)
                    css = "passed" if exact == len(checks) else "failed"
                    cells.append(
                        f'<td class="{css} num"><a href="#s{s}b{b}d{d}">'
                        f"{exact}/{len(checks)}</a></td>"
                    )
                label = f'{_e(pair[0])} <span class="muted">via {_e(pair[1])}</span>'
                rows.append(f'<tr><td class="backend">{label}</td>{"".join(cells)}</tr>')
        rows.append("</table>")
        return "\n".join(rows)

    def _cases(self, suite: str, device: str) -> list[CaseResult]:
        return self._by_cell.get((suite, device), [])

    def _link(self, result: CaseResult, note: str = "", below: str = "") -> str:
        """A list item linking to ``result``'s details; ``below``: HTML under it."""
        extra = f' <span class="muted">{_e(note)}</span>' if note else ""
        return (
            f'<li>{_badge(result.outcome)} <a href="#{self.case_id[id(result)]}">'
            f"{_e(result.name)}</a>{extra}{below}</li>"
        )

    def _not_passed(self) -> str:
        """Every test that did not pass, where, and its first differences (or its cause)."""
        bad = [r for r in self.results if r.outcome in _NOT_PASSED]
        if not bad:
            return '<h2 id="not-passed">Not passed</h2><p>Every test passed or was skipped.</p>'
        items = []
        for r in bad:
            why = "".join(f"<li>{_e(line)}</li>" for line in _why(r))
            items.append(self._link(r, f"on {where(r)}", f'<ul class="why">{why}</ul>'))
        return f'<h2 id="not-passed">Not passed ({len(bad)})</h2><ul>{"".join(items)}</ul>'

    def _cells(self) -> str:
        parts = []
        for s, suite in enumerate(self.suites):
            for d, device in enumerate(self.devices):
                cases = self._cases(suite, device)
                if cases:
                    items = "".join(self._link(r) for r in cases)
                    parts.append(
                        f'<section class="cell" id="s{s}d{d}"><h3>{_e(suite)} on '
                        f"{_e(device)}</h3><ul>{items}</ul></section>"
                    )
                for b, pair in enumerate(self._backends[suite]):
                    links = []
                    for r in cases:
                        checks = self._checks(r, pair)
                        if checks:
                            links.append(self._link(r, f"{sum(checks)}/{len(checks)} exact"))
                    if links:
                        parts.append(
                            f'<section class="cell" id="s{s}b{b}d{d}"><h3>{_e(pair[0])} via '
                            f"{_e(pair[1])} in {_e(suite)} on {_e(device)}</h3>"
                            f"<ul>{''.join(links)}</ul></section>"
                        )
        return "\n".join(parts)

    def _case(self, r: CaseResult) -> str:
        facts = ", ".join(f"{k} {v}" for k, v in r.facts.items())
        run = f", run {r.run}" if len(self.runs) > 1 else ""
        parts = [
            f'<section class="case" id="{self.case_id[id(r)]}">',
            f"<h3>{_badge(r.outcome)} {_e(r.nodeid)}</h3>",
            f'<p class="muted">device {_e(where(r))}; {r.duration:.3f} s'
            f"{_e('; ' + facts if facts else '')}{_e(run)}</p>",
        ]
        if r.infra:
            parts.append(
                f"<p><b>Infrastructure error ({_e(r.infra.phase)}):</b> "
                f"{_e(r.infra.type)}</p><pre>{_e(r.infra.message)}</pre>"
            )
        if r.failed_tries:
            tries = "".join(f"<li>{_e(t)}</li>" for t in r.failed_tries)
            parts.append(f"<p>Failed tries (a fresh agent for each next try):</p><ul>{tries}</ul>")
        for v in r.verdicts:
            parts.append(f"<p>{_badge('passed' if v.ok else 'failed')} {_e(v.summary)}</p>")
            if v.differences:
                parts.append("<ul>" + "".join(f"<li>{_e(d)}</li>" for d in v.differences) + "</ul>")
            if v.render:
                parts.append(f"<pre>{_e(v.render)}</pre>")
        if r.longrepr and r.outcome != "passed":
            parts.append(
                f"<details open><summary>failure</summary><pre>{_e(r.longrepr)}</pre></details>"
            )
        for title, text in r.sections:
            parts.append(f"<details><summary>{_e(title)}</summary><pre>{_e(text)}</pre></details>")
        if r.artifacts:
            links = "".join(
                f'<li><a href="{_e(self.artifacts_prefix + a)}">{_e(a)}</a></li>'
                for a in r.artifacts
            )
            parts.append(f"<p>Artifacts (core files, logs):</p><ul>{links}</ul>")
        parts.append("</section>")
        return "\n".join(parts)


def render_report(
    results: Sequence[CaseResult],
    title: str = "ExecuTorch device farm",
    artifacts_prefix: str = "",
    appendix: str = "",
) -> str:
    """The whole report as one HTML document.

    Artifact links are the results' artifact paths (relative to their results
    directory) prefixed with ``artifacts_prefix``; ``appendix`` is HTML placed below
    the failing tests (the run's history: :mod:`harness.history.report_section`).
    """
    return _Page(results, title, artifacts_prefix, appendix).render()


def write_report(
    path: Path,
    results: Sequence[CaseResult],
    results_dir: Path,
    title: str = "ExecuTorch device farm",
    appendix: str = "",
) -> None:
    """Write :func:`render_report` to ``path``; artifact links lead into ``results_dir``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = os.path.relpath(results_dir.resolve(), path.parent.resolve())
    prefix = "" if prefix == "." else prefix.replace(os.sep, "/") + "/"
    path.write_text(render_report(results, title, prefix, appendix), "utf-8")
