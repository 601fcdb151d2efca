"""One short summary of a night: every run caught up (each pool job, the emulated job),
their tests counted by outcome, and only what is new since each run's last comparable
one: the new failures, one a line, and the new infrastructure errors counted per device
and place (``et-harness history --run NAME`` lists them)."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from harness.history.since_last import Change, since_last
from harness.history.view import History
from harness.untrusted.reading import printable

_OUTCOMES = ("passed", "failed", "error", "infra", "skipped")
MAX_NEW_FAILURES = 50  # shown one a line; more are counted


def night_lines(history: History, run_ids: Sequence[str]) -> list[str]:
    """The night's summary for the runs ``run_ids`` (as caught up), in that order."""
    runs = [run for run in history.runs if run.id in set(run_ids)]
    order = {run_id: index for index, run_id in enumerate(run_ids)}
    runs.sort(key=lambda run: order[run.id])
    total: collections.Counter = collections.Counter()
    lines: list[str] = []
    new_failures: list[tuple[str, Change]] = []
    new_infra: collections.Counter[str] = collections.Counter()
    for run in runs:
        counts = collections.Counter(case.outcome for case in history.cases.get(run.id, ()))
        total += counts
        lines.append(f"  {run.name} ({','.join(run.devices) or '-'}): {_counts(counts)}")
        diff = since_last(history, run)
        new_failures += [(run.name, change) for change in diff.new_failures]
        places = {c.key: c.place for c in history.cases.get(run.id, ())}
        for change in diff.new_infra:
            place = places.get((change.nodeid, change.device, change.runtime_label), "")
            new_infra[f"{change.device}{' on ' + place if place else ''}"] += 1
    head = [f"night: {len(runs)} run(s): {_counts(total)}", *lines]
    head.append(f"new failures ({len(new_failures)})")
    for name, change in new_failures[:MAX_NEW_FAILURES]:
        was = f"{change.then or 'not run'} -> {change.now}"
        head.append(f"  {change.nodeid} on {change.device} ({name}): {was}")
    if len(new_failures) > MAX_NEW_FAILURES:
        head.append(f"  ... and {len(new_failures) - MAX_NEW_FAILURES} more (--json lists all)")
    infra = ", ".join(f"{where}: {count}" for where, count in sorted(new_infra.items()))
    head.append(f"new infra ({sum(new_infra.values())}){': ' + infra if infra else ''}")
    return [printable(line) for line in head]


def _counts(counts: collections.Counter) -> str:
    shown = [f"{counts[o]} {o}" for o in _OUTCOMES if counts[o] or o in ("passed", "failed")]
    return ", ".join(shown)
