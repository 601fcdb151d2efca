"""``et-harness history`` as text, one block per section (from ``command.analyse``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.untrusted.reading import printable

_SPARK_RUNS = 12


def _run_line(run: Mapping[str, Any]) -> str:
    status = "" if run["exit_status"] is None else f", exit {run['exit_status']}"
    commit = f", runtime commit {run['sdk_commit']}" if run["sdk_commit"] else ""
    return (
        f"{run['name']} on {run['host']} ({run['state']}{status}); devices "
        f"{','.join(run['devices']) or '-'}; {run['sdk_source'] or 'runtime unknown'}{commit}"
    )


def _where(check: Mapping[str, Any]) -> str:
    """``host``, ``host@1.5.0`` (a check of a run across runtimes), or ``-``."""
    label = check.get("runtime_label", "")
    return f"{check['device'] or '-'}@{label}" if label else check["device"] or "-"


def _changes(title: str, changes: list[dict[str, Any]]) -> list[str]:
    lines = [f"{title} ({len(changes)})"]  # each on its device and runtime
    for c in changes:
        detail = f"  {c['detail']}" if c["detail"] else ""
        lines.append(
            f"  {c['nodeid']} on {_where(c)}: {c['then'] or 'not run'} -> {c['now']}{detail}"
        )
    return lines


def _percent(rate: float) -> str:
    return f"{round(rate * 100):>3}%"


def history_text(where: str, history: Any, report: Mapping[str, Any]) -> list[str]:
    """The report as terminal lines; what runs from other hosts wrote (names, hosts,
    devices, test ids) is shown without its escapes or line breaks."""
    return [printable(line) for line in _lines(where, history, report)]


def _lines(where: str, history: Any, report: Mapping[str, Any]) -> list[str]:
    if report["run"] is None:
        return [f"history {where}: no runs yet"]
    lines = [f"history {where}: {report['runs']} run(s) read", f"run: {_run_line(report['run'])}"]
    lines += _since_last(report["since_last"])
    lines += _flaky(report)
    for kind in ("device", "place"):
        series = report["health"][kind]
        if kind == "place" and not series:
            continue
        lines += _health(kind, series)
    lines += _regressions(report["regressions"])
    return lines


def _since_last(diff: Mapping[str, Any]) -> list[str]:
    """What changed since the last comparable run: failures, fixes, infra, quarantines."""
    lines = [""]
    if diff["previous"] is None:
        lines.append(
            "== since the last comparable run: none (same suites on the same devices and "
            "runtimes) =="
        )
    else:
        lines.append(f"== since the last comparable run: {_run_line(diff['previous'])} ==")
    lines += _changes("new failures", diff["new_failures"])
    lines += _changes("fixed", diff["fixed"])
    lines += _changes("still failing", diff["still_failing"])
    lines += _changes("new infra", diff["new_infra"])
    quarantines = diff["quarantines"]
    lines.append(f"quarantines ({len(quarantines)})")
    lines += [f"  {q['device']}{' (new)' if q['new'] else ''}: {q['cause']}" for q in quarantines]
    return lines


def _flaky(report: Mapping[str, Any]) -> list[str]:
    """The checks that flipped within the flaky window, with their outcomes."""
    lines = [
        "",
        f"== flaky checks: last {report['flaky_window']} runs, same runtime, agent and device ==",
    ]
    if not report["flaky"]:
        lines.append("none")
    for f in report["flaky"]:
        outcomes = " ".join("P" if o == "passed" else "F" for _, o in f["outcomes"])
        lines.append(
            f"  {f['nodeid']} on {_where(f)} ({f['runtime'] or 'runtime ?'}, "
            f"agent {f['agent_version'] or '?'}): {outcomes} ({f['flips']} flips)"
        )
    return lines


def _health(kind: str, series: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each device's (or place's) infra and pass rates per run, oldest first."""
    lines = [
        "",
        f"== {kind} health: infra rate and pass rate per run, oldest first "
        "(skipped and xfailed tests aside) ==",
    ]
    for h in series:
        points = h["points"][-_SPARK_RUNS:]
        infra = " ".join(_percent(p["infra_rate"]) for p in points)
        passed = " ".join(_percent(p["pass_rate"]) for p in points)
        quarantined = sum(1 for p in h["points"] if p["quarantined"])
        last = points[-1]
        aside = ", ".join(f"{last[o]} {o}" for o in ("skipped", "xfailed") if last[o])
        lines.append(
            f"  {h['name']}: {len(h['points'])} run(s), quarantined in "
            f"{quarantined}; infra {infra}; passed {passed} (last run: {last['passed']} "
            f"of {last['judged']}{'; ' + aside + ' aside' if aside else ''})"
        )
    return lines


def _regressions(regressions: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each test failing now: where it began, the last good run, a bisection's result."""
    lines = ["", "== failing now: where it began =="]
    if not regressions:
        lines.append("none")
    for r in regressions:
        first, good = r["first_failing"], r["last_good"]
        began = (
            f"failing since {first['run']} ({first['runtime'] or 'runtime ?'}"
            f"{', commit ' + first['sdk_commit'] if first['sdk_commit'] else ''}), "
            f"{r['failing_runs']} failing run(s)"
        )
        last = (
            "; passed in no run kept"
            if good is None
            else f"; last good {good['run']} ({good['runtime'] or 'runtime ?'}"
            f"{', commit ' + good['sdk_commit'] if good['sdk_commit'] else ''})"
        )
        lines.append(f"  {r['nodeid']} on {_where(r)}: {began}{last}")
        if r.get("bisect"):
            from harness.history.bisect_results import bisect_line

            lines.append(f"    {bisect_line(r['bisect'])}")
    return lines
