"""Trend charts as inline SVG (matplotlib, headless), so the report stays one file.

Each chart has one line per device (or backend) across the runs kept, oldest left:
pass rate, infrastructure-error rate, and the tests' summed time. Text stays text in
the SVG (``svg.fonttype: none``), no scripts, no links, no external fonts.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Sequence

from harness.history.health_trends import Health, HealthPoint
from harness.history.stored_runs import RunRecord

_MAX_LINES = 8  # series per chart: the rest would be unreadable
_WIDTH_IN, _HEIGHT_IN = 7.5, 2.6


def trend_svg(
    title: str,
    runs: Sequence[RunRecord],
    series: Sequence[Health],
    value: str,
    unit: str,
) -> str:
    """One line chart of ``value`` (``pass_rate``, ``infra_rate``, ``case_time``) per series."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    index = {run.name: n for n, run in enumerate(runs)}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "et-harness"}):
        figure = Figure(figsize=(_WIDTH_IN, _HEIGHT_IN), layout="constrained")
        axes = figure.add_subplot()
        for health in _most_tested(series):
            points = [p for p in health.points if p.run in index]
            xs = [index[p.run] for p in points]
            ys = [_value(p, value) for p in points]
            axes.plot(xs, ys, marker="o", markersize=3, label=health.name)
        axes.set_title(title, fontsize=10)
        axes.set_ylabel(unit, fontsize=8)
        axes.set_xticks(range(len(runs)), [_label(r) for r in runs], fontsize=7)
        axes.tick_params(axis="x", labelrotation=30)
        if value != "case_time":
            axes.set_ylim(-0.05, 1.05)
        axes.grid(alpha=0.3)
        if series:
            axes.legend(fontsize=7, loc="best")
        out = io.StringIO()
        figure.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    svg = out.getvalue()
    return svg[svg.index("<svg") :]  # no XML prolog or DOCTYPE inside the page


def _most_tested(series: Sequence[Health]) -> list[Health]:
    """The :data:`_MAX_LINES` series with the most tests across the runs, most first."""
    return sorted(series, key=lambda h: (-sum(p.tests for p in h.points), h.name))[:_MAX_LINES]


def _value(point: HealthPoint, value: str) -> float:
    if value == "pass_rate":
        return point.pass_rate
    if value == "infra_rate":
        return point.infra_rate
    return point.case_time


def _label(run: RunRecord) -> str:
    """A run on the axis: when it started (UTC) and the start of its name; a nightly job's
    results directory has the same name every night."""
    when = datetime.datetime.fromtimestamp(run.started, datetime.UTC).strftime("%m-%d %H:%M")
    return f"{when}\n{run.name[:14]}"
