"""Catching the history up from a run's results directory (``run.json``, ``results.jsonl``).

The path for every run the store missed: its database was unreachable, the run
was killed before it wrote everything, or it ran before the history existed. Only
rows the store lacks are added, so catching up a directory twice, or one the live
writer wrote in part, records each test once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.history.records import RunIdentity, case_row, run_id, run_row
from harness.history.store import HistoryStore
from harness.history.writers import dead_writers
from harness.results.directory import (
    RESULTS_FILE,
    RUN_FILE,
    ResultsFileError,
    RunInfo,
    read_results,
)

CATCH_UP_SOURCE = "results.jsonl"


class CatchUpError(UsageError):
    """A directory is not a run's results directory; the message says which and why."""


@dataclass(frozen=True)
class CaughtUp:
    run_id: str
    added: int  # tests the store did not have
    total: int


def run_dirs(inputs: Sequence[Path]) -> list[Path]:
    """The results directories (those holding ``run.json``) named by or found under
    ``inputs`` (e.g. the downloaded artifacts of every job of a nightly run)."""
    found: list[Path] = []
    for item in inputs:
        if (item / RUN_FILE).is_file():
            found.append(item)
        elif item.is_dir():
            found += sorted(path.parent for path in item.rglob(RUN_FILE))
        else:
            raise CatchUpError(f"{item}: no such directory; give a results directory")
    if not found:
        shown = ", ".join(str(item) for item in inputs)
        raise CatchUpError(f"{shown}: no {RUN_FILE} found; give runs' results directories")
    return list(dict.fromkeys(found))


def read_run_info(results_dir: Path) -> RunInfo:
    """``run.json`` of ``results_dir`` (fields other versions add are ignored)."""
    path = results_dir / RUN_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
        return RunInfo(
            run=str(data["run"]),
            command=tuple(str(word) for word in data.get("command", ())),
            host=str(data["host"]),
            devices=tuple(str(name) for name in data.get("devices", ())),
            started=float(data["started"]),
            finished=None if data.get("finished") is None else float(data["finished"]),
            exit_status=None if data.get("exit_status") is None else int(data["exit_status"]),
            runtimes=tuple(str(label) for label in data.get("runtimes", ())),
            harness_version=str(data.get("harness_version", "")),
        )
    except FileNotFoundError:
        raise CatchUpError(f"{path}: not found; give a run's results directory") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CatchUpError(f"{path}: not a run description ({exc!r}); give another") from None


def catch_up(store: HistoryStore, results_dir: Path) -> CaughtUp:
    """Add the run in ``results_dir`` and its tests to ``store``, whatever it lacks."""
    info = read_run_info(results_dir)
    results_path = results_dir / RESULTS_FILE
    try:
        results = read_results(results_path) if results_path.exists() else []
    except (ResultsFileError, OSError, UnicodeDecodeError) as exc:
        raise CatchUpError(f"{results_path}: {exc}") from None
    key = run_id(info)
    row = run_row(info, RunIdentity.read(results_dir), results_dir, "", CATCH_UP_SOURCE)
    before = store.count_cases(key)
    store.add_run(row)
    store.add_cases([case_row(key, seq, result) for seq, result in enumerate(results)])
    if info.exit_status is not None or _writer_gone(store, key):
        store.end_run(key, info.finished, info.exit_status)
    return CaughtUp(key, store.count_cases(key) - before, len(results))


def _writer_gone(store: HistoryStore, key: str) -> bool:
    """Whether nobody still writes the run (a live run's own writer finishes it)."""
    writer = store.writer_of(key)
    return not writer or bool(dead_writers([writer]))
