"""Catching the history up from a run's results directory (``run.json``, ``results.jsonl``).

The path for every run the store missed: its database was unreachable, the run
was killed before it wrote everything, or it ran before the history existed. Only
rows the store lacks are added, so catching up a directory twice, or one the live
writer wrote in part, records each test once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.history.store import HistoryStore
from harness.history.stored_runs import RunIdentity, case_row, run_id, run_row
from harness.history.writers import dead_writers
from harness.results.directory import (
    RESULTS_FILE,
    RUN_FILE,
    ResultsFileError,
    RunInfo,
    read_results,
)
from harness.untrusted import json_fields as fields
from harness.untrusted.reading import InputFileError, read_bounded_text

CATCH_UP_SOURCE = "results.jsonl"
# How far below a --catch-up folder run.json is looked for: a nightly run's downloaded
# artifacts hold it two or three folders down.
MAX_DEPTH = 8


class CatchUpError(UsageError):
    """A directory is not a run's results directory; the message says which and why."""


@dataclass(frozen=True)
class CaughtUp:
    run_id: str
    added: int  # tests the store did not have
    total: int


def run_dirs(inputs: Sequence[Path]) -> list[Path]:
    """The results directories (those holding ``run.json``) named by or found under
    ``inputs`` (e.g. the downloaded artifacts of every job of a nightly run), at most
    :data:`MAX_DEPTH` folders down, symlinks not followed."""
    found: list[Path] = []
    for item in inputs:
        if (item / RUN_FILE).is_file():
            found.append(item)
        elif item.is_dir():
            found += sorted(_holding_runs(item))
        else:
            raise CatchUpError(f"{item}: no such directory; give a results directory")
    if not found:
        shown = ", ".join(str(item) for item in inputs)
        raise CatchUpError(f"{shown}: no {RUN_FILE} found; give runs' results directories")
    return list(dict.fromkeys(found))


def _holding_runs(top: Path) -> list[Path]:
    """The folders under ``top`` that hold ``run.json``, walked without recursion."""
    found, pending = [], [(top, 0)]
    while pending:
        folder, depth = pending.pop()
        try:
            with os.scandir(folder) as listing:  # each entry's type without a stat of it
                entries = list(listing)
        except OSError:  # unreadable: as if empty
            continue
        if any(entry.name == RUN_FILE for entry in entries):  # read, and refused, later
            found.append(folder)
        if depth < MAX_DEPTH:
            pending += [
                (Path(e.path), depth + 1) for e in entries if e.is_dir(follow_symlinks=False)
            ]
    return found


def read_run_info(results_dir: Path) -> RunInfo:
    """``run.json`` of ``results_dir`` (fields other versions add are ignored), each field
    checked: the directory may come from another host."""
    path = results_dir / RUN_FILE
    try:
        data = fields.load_object(read_bounded_text(path), "the file")
        return RunInfo(
            run=fields.text(data, "run"),
            command=fields.texts(data, "command"),
            host=fields.text(data, "host"),
            devices=fields.texts(data, "devices"),
            started=fields.number(data, "started"),
            finished=fields.optional_number(data, "finished"),
            exit_status=fields.optional_integer(data, "exit_status"),
            runtimes=fields.texts(data, "runtimes"),
            harness_version=fields.text(data, "harness_version", ""),
        )
    except InputFileError as exc:
        raise CatchUpError(f"{exc}; give a run's results directory") from None
    except ValueError as exc:  # JSON, or a field of the wrong type
        raise CatchUpError(f"{path}: not a run description ({exc}); give another") from None


def catch_up(store: HistoryStore, results_dir: Path) -> CaughtUp:
    """Add the run in ``results_dir`` and its tests to ``store``, whatever it lacks."""
    info = read_run_info(results_dir)
    results_path = results_dir / RESULTS_FILE
    try:
        results = read_results(results_path) if results_path.exists() else []
    except ResultsFileError as exc:
        raise CatchUpError(str(exc)) from None
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
