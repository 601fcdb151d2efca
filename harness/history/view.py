"""The part of the history an analysis reads: the last N runs and their tests, filtered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.history.stored_runs import CaseRecord, CheckKey, RunRecord


@dataclass(frozen=True)
class CaseFilter:
    """Which tests to look at: on a device, checking a backend, with a text in the id, on a
    runtime (its ``--runtime`` label)."""

    device: str | None = None
    backend: str | None = None
    test: str | None = None
    runtime: str | None = None

    def keeps(self, case: CaseRecord) -> bool:
        return (
            (self.device is None or case.device == self.device)
            and (self.runtime is None or case.runtime_label == self.runtime)
            and (self.backend is None or self.backend in case.backends)
            and (self.test is None or self.test in case.nodeid)
        )


@dataclass(frozen=True)
class History:
    """Runs oldest first, and each run's tests that the filter keeps."""

    runs: tuple[RunRecord, ...]
    cases: Mapping[str, tuple[CaseRecord, ...]] = field(default_factory=dict)

    @classmethod
    def load(cls, store: Any, count: int, keep: CaseFilter = CaseFilter()) -> History:
        """The last ``count`` runs of ``store`` (a :class:`~harness.history.store.HistoryStore`)."""
        runs = tuple(store.recent_runs(count))
        return cls.of(runs, store.cases_of([r.id for r in runs]), keep)

    @classmethod
    def of(cls, runs: tuple[RunRecord, ...], cases: list[CaseRecord], keep: CaseFilter) -> History:
        by_run: dict[str, list[CaseRecord]] = {run.id: [] for run in runs}
        for case in cases:
            if case.run_id in by_run and keep.keeps(case):
                by_run[case.run_id].append(case)
        return cls(runs, {key: tuple(value) for key, value in by_run.items()})

    def run(self, key: str) -> RunRecord | None:
        return next((r for r in self.runs if r.id == key), None)

    def of_run(self, key: str) -> dict[CheckKey, CaseRecord]:
        """The run's tests by check (test, device, runtime)."""
        return {case.key: case for case in self.cases.get(key, ())}

    def before(self, run: RunRecord) -> tuple[RunRecord, ...]:
        """The runs that started before ``run``, oldest first."""
        return tuple(r for r in self.runs if (r.started, r.id) < (run.started, run.id))
