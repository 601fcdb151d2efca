"""``et-harness history``: what changed since the last comparable run, flaky checks,
device and place health, and where each failure began; text or ``--json``.

``--catch-up DIR...`` first adds runs from their results directories (the path for
runs whose store was unreachable, and for older runs).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.untrusted.reading import printable

DEFAULT_RUNS = 30
DEFAULT_FLAKY_WINDOW = 10


class HistoryFilterError(UsageError):
    """A filter of ``et-harness history`` keeps no test of the runs read."""


class HistoryOutputError(UsageError):
    """The history page could not be written; the message says what to do."""


def add_parser(commands: Any, positive_int: Any) -> None:
    """The ``history`` subcommand's options, on ``et-harness``'s subparsers."""
    cmd = commands.add_parser(
        "history",
        help="what changed since the last run, flaky checks, health, where failures began",
        description=__doc__.split("\n\n")[0],
    )
    cmd.add_argument(
        "--history",
        metavar="STORE",
        help="SQLite file or postgresql:// URL (default: $ET_HARNESS_HISTORY or "
        "~/.local/share/et-harness/history.sqlite)",
    )
    cmd.add_argument("--device", dest="on_device", help="only tests on this device")
    cmd.add_argument("--backend", help="only tests whose verdicts checked this backend")
    cmd.add_argument(
        "--runtime", dest="on_runtime", help="only tests on this runtime (a --runtime label)"
    )
    cmd.add_argument("--test", help="only tests whose id contains this text")
    cmd.add_argument("--run", help="the run to look from (its name; default: the latest)")
    cmd.add_argument(
        "--runs", type=positive_int, default=DEFAULT_RUNS, help="runs to read (default: 30)"
    )
    cmd.add_argument(
        "--flaky-window",
        type=positive_int,
        default=DEFAULT_FLAKY_WINDOW,
        help="runs the flaky checks look at (default: 10)",
    )
    cmd.add_argument("--json", action="store_true", help="print one JSON document")
    cmd.add_argument(
        "--html",
        type=Path,
        metavar="PATH",
        help="also write a self-contained HTML page: what changed for each run caught up "
        "(else the latest), and the trend charts",
    )
    cmd.add_argument(
        "--night",
        action="store_true",
        help="with --catch-up: print one short summary of the runs caught up (a nightly's "
        "jobs): their counts, the new failures, the new infra counted per device and place",
    )
    cmd.add_argument(
        "--catch-up",
        nargs="+",
        type=Path,
        default=[],
        metavar="RESULTS_DIR",
        help="first add the runs in these results directories (run.json, results.jsonl; "
        "directories holding them are searched)",
    )


def run_history(args: argparse.Namespace) -> int:
    from harness.history.catch_up import catch_up, run_dirs
    from harness.history.report_section import history_page
    from harness.history.store import HistoryStore, StoreError
    from harness.history.target import OFF, checked_target
    from harness.history.terminal import history_text
    from harness.history.view import CaseFilter, History
    from harness.history.writers import dead_writers

    target = checked_target(args.history)
    if target == OFF:
        raise StoreError("history is off ($ET_HARNESS_HISTORY=off); give --history STORE")
    if args.night and not args.catch_up:
        raise HistoryFilterError("--night summarises the runs caught up: give --catch-up DIR...")
    directories = run_dirs(args.catch_up) if args.catch_up else []
    # A store named by --history must be there to be read; the default one is made
    store = HistoryStore.open(target, create=bool(directories) or args.history is None)
    try:
        caught = []
        for directory in directories:
            done = catch_up(store, directory)
            caught.append(done.run_id)
            if not args.json:
                print(
                    printable(f"caught up {done.run_id}: {done.added} of {done.total} tests added")
                )
        store.mark_abandoned(dead_writers(store.running_writers()))
        keep = CaseFilter(args.on_device, args.backend, args.test, args.on_runtime)
        history = History.load(store, args.runs, keep)
        if keep != CaseFilter() and history.runs and not any(history.cases.values()):
            raise HistoryFilterError(_nothing_matches(keep, History.load(store, args.runs)))
        report = analyse(history, args.run, args.flaky_window)
        if args.json:
            print(json.dumps({"store": store.where, **report}, indent=2, ensure_ascii=False))
        elif args.night:
            from harness.history.night import night_lines

            print("\n".join(night_lines(history, caught)))
        else:
            print("\n".join(history_text(store.where, history, report)))
        if args.html:
            try:
                args.html.write_text(history_page(store, caught), "utf-8")
            except OSError as exc:
                raise HistoryOutputError(
                    f"--html {args.html}: writing the page failed ({exc.strerror}); "
                    "the history in the store is complete"
                ) from None
            if not args.json:
                print(f"history page: {args.html}")
    finally:
        store.close()
    return 0


def _nothing_matches(keep: Any, everything: Any) -> str:
    """One line: the filter that kept no test, and the values the history does have."""
    cases = [case for run in everything.cases.values() for case in run]
    fields = (
        ("--device", keep.device, {c.device for c in cases}),
        ("--runtime", keep.runtime, {c.runtime_label for c in cases}),
        ("--backend", keep.backend, {b for c in cases for b in c.backends}),
    )
    parts = [
        f"{option} {value!r} (there: {_some(seen)})"
        for option, value, seen in fields
        if value is not None and value not in seen
    ]
    if keep.test is not None and not any(keep.test in c.nodeid for c in cases):
        parts.append(f"--test {keep.test!r} (in no test id)")
    named = printable("; ".join(parts) or "the filters together")
    return (
        f"no test of the last {len(everything.runs)} run(s) matches {named}; "
        "give a value the history has, or leave the filter out"
    )


def _some(values: set[str], most: int = 10) -> str:
    """Up to ``most`` of ``values``, sorted; "" (a device's own runtime) shown as such."""
    shown = sorted(v or "each device's own runtime" for v in values)
    more = f" and {len(shown) - most} more" if len(shown) > most else ""
    return ", ".join(shown[:most]) + more if shown else "nothing"


def analyse(history: Any, run_name: str | None, window: int) -> dict[str, Any]:
    """Every section, as plain data (what ``--json`` prints)."""
    from harness.history.flaky import flaky_checks
    from harness.history.health_trends import health
    from harness.history.regression import regressions
    from harness.history.since_last import since_last
    from harness.history.store import StoreError

    if not history.runs:
        return {"runs": 0, "run": None}
    if run_name is None:
        run = history.runs[-1]
    else:
        run = next((r for r in reversed(history.runs) if r.name == run_name), None)
        if run is None:
            raise StoreError(f"--run {run_name}: not among the last {len(history.runs)} runs")
    return {
        "runs": len(history.runs),
        "run": run.as_json(),
        "since_last": since_last(history, run).as_json(),
        "flaky": [f.as_json() for f in flaky_checks(history, window)],
        "flaky_window": window,
        "health": {
            kind: [h.as_json() for h in health(history, kind)] for kind in ("device", "place")
        },
        "regressions": [_with_bisect(r.as_json()) for r in regressions(history, run)],
    }


def _with_bisect(regression: dict[str, Any]) -> dict[str, Any]:
    """A regression with the kept bisect that explains it, if any (``bisect``)."""
    from harness.history.bisect_results import explaining, kept_bisects

    found = explaining(regression["nodeid"], regression["device"], kept_bisects())
    return {**regression, "bisect": found}
