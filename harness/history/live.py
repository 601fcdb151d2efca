"""The history written as a run goes: a listener of the run's results recorder.

It gets the very records ``results.jsonl`` gets (:class:`~harness.results.directory.RunListener`)
and writes each at once, so a killed run keeps in the store what it kept in its
results file, and is marked incomplete by the next run or reader
(:mod:`harness.history.writers`). The store is opened with the run's first device
result, never before (a run of the project's own unit tests touches no store).

The store never fails a run: when it cannot be reached or written, one warning says
so, the run goes on with ``results.jsonl`` as its record, and at the run's end one
more try writes everything it missed; should that fail too, ``et-harness history
--catch-up RESULTS_DIR`` adds the run later.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.history.stored_runs import RunIdentity, case_row, run_id, run_row
from harness.history.target import OFF, TargetError, checked_target
from harness.lifecycle.disk import DiskTrouble
from harness.results.directory import RunInfo
from harness.results.records import CaseResult

OPTION = "--history"


def add_history_option(parser: pytest.Parser) -> None:
    group = parser.getgroup("et-harness")
    group.addoption(
        OPTION,
        default=None,
        metavar="STORE",
        help="the run history: an SQLite file or a postgresql:// URL; 'off' for none "
        "(default: $ET_HARNESS_HISTORY or ~/.local/share/et-harness/history.sqlite)",
    )


class LiveHistory:
    """Writes a run into the history store as its results come (a ``RunListener``)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.store: Any = None  # a HistoryStore once opened (sqlalchemy loads only then)
        self.lost: str | None = None  # why the store is not written, once it failed
        self._run: dict[str, Any] | None = None
        self._rows: list[dict[str, Any]] = []
        self._written = 0  # of _rows, in the store

    @classmethod
    def of(cls, config: pytest.Config) -> LiveHistory | None:
        """The run's history writer, or None with ``--history off``; a target (``--history``
        or ``ET_HARNESS_HISTORY``) no store can be made of is a usage error before any test."""
        try:
            target = checked_target(config.getoption("history"))
        except (TargetError, DiskTrouble) as exc:  # DiskTrouble: moving an older history
            raise pytest.UsageError(str(exc)) from None
        return None if target == OFF else cls(target)

    def run_started(self, info: RunInfo, results_dir: Path) -> None:
        from harness.history.writers import this_writer

        identity = RunIdentity.of_this_process(info.runtimes)
        try:
            identity.write(results_dir)
        except OSError:
            pass  # the results writer reports a results directory it cannot write
        self._run = run_row(info, identity, results_dir, this_writer(), "live")
        self._attempt(lambda store: store.add_run(self._run))

    def result_written(self, result: CaseResult) -> None:
        if self._run is None:
            return
        self._rows.append(case_row(self._run["id"], len(self._rows), result))
        if self.lost is None:
            self._attempt(self._flush)

    def run_finished(self, info: RunInfo) -> None:
        if self._run is None:
            return
        if self.lost is not None:  # one more try: the store may be back
            self.lost = None
            self._close()
            self._attempt(lambda store: store.add_run(self._run))
        key = run_id(info)
        if self._attempt(self._flush) and self._attempt(
            lambda store: store.end_run(key, info.finished, info.exit_status)
        ):
            return
        from harness.history.store import shown, store_url

        print(
            f"et-harness: {self.lost}; results.jsonl keeps the run: add it to the history "
            f"later with: et-harness history --history {shown(store_url(self.target))} "
            f"--catch-up {self._run['results_dir']}",
            file=sys.stderr,
        )

    def report_section(self, results: Sequence[CaseResult]) -> str:
        from harness.history.report_section import history_section, unavailable_section

        if self._run is None:
            return ""
        if self.lost is not None or self.store is None:
            return unavailable_section(self.lost or "the store was not opened")
        key = self._run["id"]
        try:
            return self._guarded(lambda store: history_section(store, key)) or (
                unavailable_section(self.lost or "")
            )
        finally:
            self._close()  # the run's last use of the store

    def _close(self) -> None:
        if self.store is not None:
            store, self.store = self.store, None
            store.close()

    def _flush(self, store: Any) -> None:
        store.add_cases(self._rows[self._written :])
        self._written = len(self._rows)

    def _attempt(self, action: Callable[[Any], None]) -> bool:
        """Do ``action`` on the store (opened on first use); on trouble, warn once."""

        def done(store: Any) -> bool:
            action(store)
            return True

        return self._guarded(done) is not None

    def _guarded(self, action: Callable[[Any], Any]) -> Any:
        from harness.history.store import HistoryStore, StoreError
        from harness.history.writers import dead_writers

        if self.lost is not None:
            return None
        try:
            if self.store is None:
                self.store = HistoryStore.open(self.target)
                self.store.mark_abandoned(dead_writers(self.store.running_writers()))
            return action(self.store)
        except StoreError as exc:
            self.lost = str(exc)
            print(
                f"et-harness: {exc}; the run goes on, results.jsonl keeps it",
                file=sys.stderr,
            )
            return None
