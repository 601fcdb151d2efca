"""The report's history: what changed since the last comparable run, where failures
began, flaky checks, and trend charts (:mod:`harness.history.charts`)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from harness.extras import CHARTS
from harness.history.charts import trend_svg
from harness.history.flaky import flaky_checks
from harness.history.health_trends import health
from harness.history.regression import RunAt, regressions
from harness.history.since_last import Change, since_last
from harness.history.stored_runs import RunRecord
from harness.history.view import History
from harness.results.html_style import html_page

REPORT_RUNS = 30  # runs the charts show
FLAKY_WINDOW = 10


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def unavailable_section(reason: str) -> str:
    return (
        '<h2 id="history">Since the last run</h2><p class="muted">The run history is not '
        f"available ({_e(reason)}); results.jsonl keeps this run.</p>"
    )


def _changes(title: str, css: str, changes: Sequence[Change]) -> str:
    if not changes:
        return f"<h3>{_e(title)}: none</h3>"
    rows = "".join(
        f'<tr><td class="{css}">{_e(c.nodeid)}</td><td>{_e(c.device)}</td>'
        f"<td>{_e(c.then or 'not run')} → {_e(c.now)}</td><td>{_e(c.detail)}</td></tr>"
        for c in changes
    )
    return (
        f"<h3>{_e(title)} ({len(changes)})</h3><table><tr><th>test</th><th>device</th>"
        f"<th>then → now</th><th>differences or cause</th></tr>{rows}</table>"
    )


def _at(run: RunAt) -> str:
    what = ", ".join(part for part in (run.runtime, run.sdk_commit) if part)
    return f"{_e(run.run)} ({_e(what)})" if what else _e(run.run)


def history_section(store: Any, run_id: str) -> str:
    """The report's section for run ``run_id`` from what ``store`` holds."""
    history = History.load(store, REPORT_RUNS)
    run = history.run(run_id)
    if run is None:
        return unavailable_section(f"run {run_id} is not in {store.where}")
    heading = '<h2 id="history">Since the last run</h2>'
    return _changes_html(history, run, store.where, heading) + _trends(history)


def history_page(store: Any, run_ids: Sequence[str]) -> str:
    """A page of its own: what changed for each of these runs (default: the latest), then
    the trends (``et-harness history --html``)."""
    history = History.load(store, REPORT_RUNS)
    chosen = [run for key in run_ids if (run := history.run(key)) is not None]
    if not chosen and history.runs:
        chosen = [history.runs[-1]]
    parts = [
        _changes_html(
            history,
            run,
            store.where,
            f"<h2>Since the last run: {_e(run.name)} on {_e(', '.join(run.devices))}</h2>",
        )
        for run in chosen
    ]
    body = "\n".join(parts) + _trends(history) if chosen else "<p>No runs yet.</p>"
    return html_page("ExecuTorch device farm: history", body)


def _changes_html(history: History, run: RunRecord, where: str, heading: str) -> str:
    diff = since_last(history, run)
    if diff.previous is None:
        compared = "no comparable run (same suites on the same devices) before this one"
    else:
        compared = f"compared with run {diff.previous.name} ({diff.previous.state})"
    parts = [
        heading,
        f'<p class="muted">History {_e(where)}: {len(history.runs)} run(s); {_e(compared)}.</p>',
        _changes("New failures", "failed", diff.new_failures),
        _changes("Fixed", "passed", diff.fixed),
        _changes("Still failing", "failed", diff.still_failing),
        _changes("New infrastructure errors", "infra", diff.new_infra),
    ]
    if diff.quarantines:
        items = "".join(
            f"<li>{_e(q.device)}{' (new)' if q.new else ''}: {_e(q.cause)}</li>"
            for q in diff.quarantines
        )
        parts.append(f"<h3>Quarantined</h3><ul>{items}</ul>")
    found = regressions(history, run)
    if found:
        rows = "".join(
            f'<tr><td class="failed">{_e(r.nodeid)}</td><td>{_e(r.device)}</td>'
            f"<td>{_at(r.first_failing)}</td>"
            f"<td>{_at(r.last_good) if r.last_good else 'none kept'}</td></tr>"
            for r in found
        )
        parts.append(
            "<h3>Where failures began</h3><table><tr><th>test</th><th>device</th>"
            f"<th>first failing run (runtime, commit)</th><th>last good run</th></tr>{rows}</table>"
        )
    flaky = flaky_checks(history, FLAKY_WINDOW)
    if flaky:
        rows = "".join(
            f"<tr><td>{_e(f.nodeid)}</td><td>{_e(f.device)}</td><td>{f.flips}</td>"
            f"<td>{_e(' '.join(o for _, o in f.outcomes))}</td></tr>"
            for f in flaky
        )
        parts.append(
            f"<h3>Flaky checks (last {FLAKY_WINDOW} runs)</h3><table><tr><th>test</th>"
            f"<th>device</th><th>flips</th><th>outcomes</th></tr>{rows}</table>"
        )
    return "\n".join(parts)


MIN_TREND_RUNS = 2  # a trend of one point says nothing


def _trends(history: History) -> str:
    """The trend charts, once the history holds :data:`MIN_TREND_RUNS` runs; without the
    ``[history]`` extra, one line naming it."""
    if len(history.runs) < MIN_TREND_RUNS:
        return ""
    missing = CHARTS.missing("Drawing the trend charts")
    if missing is not None:
        return f'<h2 id="trends">Trends</h2><p class="muted">{_e(missing)}</p>'

    devices = health(history, "device")
    backends = health(history, "backend")
    pass_unit = "passed / tests neither skipped nor xfailed"
    charts = [
        trend_svg("pass rate per device", history.runs, devices, "pass_rate", pass_unit),
        trend_svg(
            "infrastructure-error rate per device",
            history.runs,
            devices,
            "infra_rate",
            "infra / tests",
        ),
        trend_svg("pass rate per backend", history.runs, backends, "pass_rate", pass_unit),
        trend_svg(
            "infrastructure-error rate per backend",
            history.runs,
            backends,
            "infra_rate",
            "infra / tests",
        ),
        trend_svg("case time per device", history.runs, devices, "case_time", "seconds"),
    ]
    places = health(history, "place")
    if places:  # lab runs: the places' own trouble, whichever device profile took them
        charts.append(
            trend_svg(
                "infrastructure-error rate per lab place",
                history.runs,
                places,
                "infra_rate",
                "infra / tests",
            )
        )
    figures = "".join(f'<figure class="trend">{svg}</figure>' for svg in charts)
    return f'<h2 id="trends">Trends</h2>{figures}'
