"""One self-contained HTML file for a run (or many merged runs): no scripts, no external assets.

The first screen is the answer: the verdict (the outcome counts), the tests that did not
pass, each with its first differences, then per device the option checks of each of its
own (real) backends, the terminal's delivery table, and the checks that differ across
runtimes. Below come the matrix, one column per device (per device and runtime in a run
across runtimes) and per suite a row of test outcomes and a row per real backend and
route its verdicts checked (route: the load path, ``program``, ``module``,
``module_method``, ``module_both``, or ``set`` / ``get``), failures first; the probes'
rows (and names the devices lack) folded under their own heading; the run's history
(what changed since the last run, the trend charts), the devices (facts, outcome counts,
quarantine reasons), and every cell's and case's details: outcome, infrastructure error
and failed tries, every verdict's summary and, where options differed, the rendered diff
(:meth:`harness.check.Verdict.render`), the failure text, agent stderr and artifacts.
"""

from __future__ import annotations

import collections
import datetime
import os
from collections.abc import Sequence
from pathlib import Path

from harness.results.boards import board_section
from harness.results.html_style import SHOWN, badge, counts_text, esc, html_page, mark, worst
from harness.results.options_section import options_section
from harness.results.records import CaseResult
from harness.results.summary import (
    ROUTES,
    across_runtimes,
    backend_counts,
    devices_in_order,
    outcome_counts,
    quarantined_devices,
    real_backends,
    routes_of,
    verdicts_line,
    where,
)

_NOT_PASSED = ("failed", "error", "infra", "xpassed")
_WHY_LINES = 3  # differences shown beside a test that did not pass
_NAMED_PROBES = 8  # probe backends named in the heading of their folded rows
_FACT_COLUMNS = ("abi", "runtime", "agent_version")  # the devices' table's; the rest in one


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


def _delivery_cell(counter: collections.Counter | None, routes: Sequence[str]) -> str:
    """One backend's checks on one device: exact / all, the wrong ones, and per route."""
    if not counter:
        return '<td class="none">-</td>'
    ok, wrong = counter["ok"], counter["wrong"]
    per_route = " · ".join(
        f"{route} {counter[(route, 'ok')]}/{counter[(route, 'ok')] + counter[(route, 'wrong')]}"
        for route in routes
        if counter[(route, "ok")] + counter[(route, "wrong")]
    )
    bad = f", {wrong} wrong" if wrong else ""
    return (
        f'<td class="{"failed" if wrong else "passed"}">{ok}/{ok + wrong} exact{bad}'
        f'<br><span class="muted">{esc(per_route)}</span></td>'
    )


def _plain(r: CaseResult) -> bool:
    """A passed case with nothing to show but its exact verdicts' summaries."""
    return (
        r.outcome == "passed"
        and all(v.ok for v in r.verdicts)
        and not (r.infra or r.failed_tries or r.sections or r.artifacts)
    )


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
        self.real = real_backends(self.results)

    def render(self) -> str:
        """The answer first: the verdict, the tests that did not pass with their
        differences, the real backends' checks per device, what the options did and the
        runtimes side by side;
        then the matrix (failures first), the probes folded, the history (what changed,
        the trends), the devices, and every cell and case."""
        parts = [
            self._overview(),
            self._not_passed(),
            self._backend_summary(),
            options_section(self.results, self._link),
            self._across_runtimes(),
            board_section(self.results),
            "<h2>Matrix: suites and real backends by device</h2>",
            '<p class="muted">Failures first. Suite rows count tests (✓ passed, ✗ failed, '
            "E error, I infrastructure error, s skipped, x xfailed); backend rows count the "
            "option checks of the devices' own backends (exact / all); the probes' rows "
            'are <a href="#probes">below</a>. Click a cell for its cases.</p>',
            self._matrix(),
            self._probes(),
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
        verdict = "failed" if bad else "passed"
        return (
            f'<p class="verdict {verdict}"><b>{verdict.capitalize()}:</b> '
            f"{len(self.results)} tests on "
            f"{len(devices)} device(s){esc(runtimes)}: "
            f"{esc(', '.join(f'{n} {o}' for o, n in total.most_common()))}.{jump} "
            f'<span class="muted">Generated {when}{esc(runs)}.</span></p>'
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
            rest = "<br>".join(  # one fact a line; lists wrap after their commas
                esc(f"{k} {v.replace(',', ', ')}") for k, v in f.items() if k not in _FACT_COLUMNS
            )
            rows.append(
                f'<tr><th class="{worst(c)}">{esc(device)}</th>'
                + "".join(f"<td>{esc(f.get(k, ''))}</td>" for k in _FACT_COLUMNS)
                + "".join(f'<td class="num">{c[o]}</td>' for o in SHOWN)
                + f"<td>{esc(quarantined.get(device, ''))}</td><td>{rest}</td></tr>"
            )
        head = "".join(f"<th>{o}</th>" for o in SHOWN)
        return (
            "<h2>Devices</h2><table><tr><th>device</th><th>ABI</th><th>runtime</th>"
            f"<th>agent</th>{head}<th>quarantined</th><th>facts</th></tr>{''.join(rows)}"
            "</table>"
        )

    def _across_runtimes(self) -> str:
        """Side by side, the checks that are not the same on every runtime (``--runtime``)."""
        labels, differing, agreeing = across_runtimes(self.results)
        if len(labels) < 2:
            return ""
        head = "".join(f"<th>{esc(label)}</th>" for label in labels)
        rows = []
        for check, device, on in differing:
            cells = []
            for label in labels:
                r = on.get(label)
                if r is None:
                    cells.append('<td class="none">not run</td>')
                    continue
                first = next((d for v in r.verdicts for d in v.differences), "")
                note = f'<br><span class="muted">{esc(first[:160])}</span>' if first else ""
                cells.append(
                    f'<td class="{esc(r.outcome)}"><a href="#{self.case_id[id(r)]}">'
                    f"{esc(r.outcome)}</a>{note}</td>"
                )
            rows.append(f"<tr><th>{esc(check)}</th><td>{esc(device)}</td>{''.join(cells)}</tr>")
        table = (
            f"<table><tr><th>check</th><th>device</th>{head}</tr>{''.join(rows)}</table>"
            if rows
            else ""
        )
        return (
            f"<h2>Across runtimes: {len(differing)} check(s) differ</h2>"
            f'<p class="muted">{agreeing} check(s) have the same outcome and differences on '
            f"every runtime ({esc(', '.join(labels))}).</p>{table}"
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

    def _suites_in_order(self) -> list[tuple[int, str]]:
        """The suites with the most failing tests first, with their numbers (cell ids)."""
        return sorted(enumerate(self.suites), key=lambda s: -self._failing(self._by_suite[s[1]]))

    def _pairs(self, suite: str, real: bool) -> list[tuple[int, tuple[str, str]]]:
        """The suite's (number, (backend, route)) rows of real backends (else of probes
        and names the devices lack), the most inexact first."""
        pairs = [p for p in enumerate(self._backends[suite]) if (p[1][0] in self.real) == real]
        return sorted(pairs, key=lambda p: -self._inexact(suite, p[1]))

    def _matrix(self) -> str:
        """Suites and their real backends' rows with the most failures first (the devices
        keep their order: a run across runtimes shows them side by side); the ids of the
        cells they link to stay those of :meth:`_cells`."""
        head = "".join(f"<th>{esc(d)}</th>" for d in self.devices)
        rows = [f"<table><tr><th>suite / backend via path</th>{head}</tr>"]
        for s, suite in self._suites_in_order():
            cells = []
            for d, device in enumerate(self.devices):
                outcomes = collections.Counter(r.outcome for r in self._cases(suite, device))
                if not outcomes:
                    cells.append('<td class="none">-</td>')
                    continue
                cells.append(
                    f'<td class="{worst(outcomes)}"><a href="#s{s}d{d}">'
                    f"{esc(counts_text(outcomes))}</a></td>"
                )
            rows.append(f'<tr class="suite"><th>{esc(suite)}</th>{"".join(cells)}</tr>')
            rows += self._backend_rows(s, suite, self._pairs(suite, real=True), own_cells=True)
        rows.append("</table>")
        return "\n".join(rows)

    def _backend_rows(
        self, s: int, suite: str, pairs: list[tuple[int, tuple[str, str]]], own_cells: bool
    ) -> list[str]:
        """A row per (backend, route) of ``suite``: exact / all checks per device, linking
        to the row's own cell (``own_cells``) or, for a probe's, to the suite's."""
        rows = []
        for b, pair in pairs:
            cells = []
            for d, device in enumerate(self.devices):
                checks = [ok for r in self._cases(suite, device) for ok in self._checks(r, pair)]
                if not checks:
                    cells.append('<td class="none">-</td>')
                    continue
                exact = sum(checks)
                css = "passed" if exact == len(checks) else "failed"
                target = f"s{s}b{b}d{d}" if own_cells else f"s{s}d{d}"
                cells.append(
                    f'<td class="{css} num"><a href="#{target}">{exact}/{len(checks)}</a></td>'
                )
            label = f'{esc(pair[0])} <span class="muted">via {esc(pair[1])}</span>'
            rows.append(f'<tr><td class="backend">{label}</td>{"".join(cells)}</tr>')
        return rows

    def _probes(self) -> str:
        """The probes' rows (and those of names the devices lack), folded under a summary
        of their checks: the harness's own instruments, not the devices' backends."""
        rows: list[str] = []
        names: set[str] = set()
        checks = wrong = backend_rows = 0
        span = len(self.devices) + 1
        for s, suite in self._suites_in_order():
            pairs = self._pairs(suite, real=False)
            if not pairs:
                continue
            rows.append(f'<tr class="suite"><th colspan="{span}">{esc(suite)}</th></tr>')
            rows += self._backend_rows(s, suite, pairs, own_cells=False)
            backend_rows += len(pairs)
            for _, pair in pairs:
                names.add(pair[0])
                found = [ok for r in self._by_suite[suite] for ok in self._checks(r, pair)]
                checks, wrong = checks + len(found), wrong + found.count(False)
        if not rows:
            return ""
        shown = sorted(names)[:_NAMED_PROBES]
        more = f" and {len(names) - len(shown)} more" if len(names) > len(shown) else ""
        css = "failed" if wrong else "passed"
        return (
            '<h2 id="probes">Probes and names the devices lack</h2><details class="probes">'
            f'<summary><span class="badge {css}">{wrong} wrong</span> {checks} checks in '
            f"{backend_rows} rows of "
            f"{len(names)} backends ({esc(', '.join(shown))}{more})</summary>"
            f"<table>{''.join(rows)}</table></details>"
        )

    def _backend_summary(self) -> str:
        """Per device, each of its real backends' option checks (exact / all, per route),
        the probes' in one row and its verdicts: the terminal's delivery table."""
        counts = backend_counts(self.results)
        devices = [d for d in self.devices if counts.get(d)]
        if not devices:
            return ""
        routes = routes_of(self.results)
        head = "".join(f"<th>{esc(d)}</th>" for d in devices)
        rows = [f"<table><tr><th>backend</th>{head}</tr>"]
        for name in sorted({b for d in devices for b in counts[d] if b in self.real}):
            cells = "".join(_delivery_cell(counts[d].get(name), routes) for d in devices)
            rows.append(f'<tr><td class="backend">{esc(name)}</td>{cells}</tr>')
        probes = [
            sum((c for b, c in counts[d].items() if b not in self.real), collections.Counter())
            for d in devices
        ]
        if any(probes):
            cells = "".join(_delivery_cell(c or None, routes) for c in probes)
            label = '<a href="#probes">probes and names the devices lack</a>'
            rows.append(f'<tr><td class="backend">{label}</td>{cells}</tr>')
        lines = "".join(
            f"<td>{esc(verdicts_line([r for r in self.results if where(r) == d]))}</td>"
            for d in devices
        )
        rows.append(f"<tr><th>verdicts</th>{lines}</tr></table>")
        return (
            "<h2>Backends: option checks per device</h2>"
            '<p class="muted">Exact / all checks of each backend the device announces as its '
            "own, then per route (load path, set, get).</p>" + "".join(rows)
        )

    def _cases(self, suite: str, device: str) -> list[CaseResult]:
        return self._by_cell.get((suite, device), [])

    def _link(self, result: CaseResult, note: str = "", below: str = "") -> str:
        """A list item linking to ``result``'s details; ``below``: HTML under it."""
        extra = f' <span class="muted">{esc(note)}</span>' if note else ""
        return (
            f'<li>{mark(result.outcome)} <a href="#{self.case_id[id(result)]}">'
            f"{esc(result.name)}</a>{extra}{below}</li>"
        )

    def _not_passed(self) -> str:
        """Every test that did not pass, where, and its first differences (or its cause)."""
        bad = [r for r in self.results if r.outcome in _NOT_PASSED]
        if not bad:
            return (
                '<h2 id="not-passed">Not passed</h2><p>Every test passed, or was skipped or '
                "xfailed as marked.</p>"
            )
        items = []
        for r in bad:
            why = "".join(f"<li>{esc(line)}</li>" for line in _why(r))
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
                        f'<section class="cell" id="s{s}d{d}"><h3>{esc(suite)} on '
                        f"{esc(device)}</h3><ul>{items}</ul></section>"
                    )
                for b, pair in self._pairs(suite, real=True):
                    links = []
                    for r in cases:
                        checks = self._checks(r, pair)
                        if checks:
                            links.append(self._link(r, f"{sum(checks)}/{len(checks)} exact"))
                    if links:
                        parts.append(
                            f'<section class="cell" id="s{s}b{b}d{d}"><h3>{esc(pair[0])} via '
                            f"{esc(pair[1])} in {esc(suite)} on {esc(device)}</h3>"
                            f"<ul>{''.join(links)}</ul></section>"
                        )
        return "\n".join(parts)

    def _case(self, r: CaseResult) -> str:
        """A case's details; its device's facts are in the devices' table, once."""
        run = f", run {r.run}" if len(self.runs) > 1 else ""
        head = f'<section class="case" id="{self.case_id[id(r)]}"><h3>{mark(r.outcome)} '
        head += f"{esc(r.nodeid)}</h3>"
        if _plain(r):  # one line: most of a big run's cases, kept small
            line = "; ".join(
                [where(r), f"{r.duration:.3f} s{run}", *(v.summary for v in r.verdicts)]
            )
            return f'{head}<p class="muted">{esc(line)}</p></section>'
        parts = [
            head,
            f'<p class="muted">device {esc(where(r))}; {r.duration:.3f} s{esc(run)}</p>',
        ]
        if r.infra:
            parts.append(
                f"<p><b>Infrastructure error ({esc(r.infra.phase)}):</b> "
                f"{esc(r.infra.type)}</p><pre>{esc(r.infra.message)}</pre>"
            )
        if r.failed_tries:
            tries = "".join(f"<li>{esc(t)}</li>" for t in r.failed_tries)
            parts.append(f"<p>Failed tries (a fresh agent for each next try):</p><ul>{tries}</ul>")
        for v in r.verdicts:
            parts.append(f"<p>{badge('passed' if v.ok else 'failed')} {esc(v.summary)}</p>")
            if v.differences:
                parts.append(
                    "<ul>" + "".join(f"<li>{esc(d)}</li>" for d in v.differences) + "</ul>"
                )
            if v.render:
                parts.append(f"<pre>{esc(v.render)}</pre>")
        if r.longrepr and r.outcome != "passed":
            parts.append(
                f"<details open><summary>failure</summary><pre>{esc(r.longrepr)}</pre></details>"
            )
        for title, text in r.sections:
            parts.append(
                f"<details><summary>{esc(title)}</summary><pre>{esc(text)}</pre></details>"
            )
        if r.artifacts:
            links = "".join(
                f'<li><a href="{esc(self.artifacts_prefix + a)}">{esc(a)}</a></li>'
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
