"""Where a regression began: for each check failing in a run, the first run of its
current failing streak and the last run before it where it passed, with the runtime
version and commit each ran on. Runs where the check was not run, was skipped or hit
device trouble neither break the streak nor end the search."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.history.stored_runs import CaseRecord, RunRecord
from harness.history.view import History


@dataclass(frozen=True)
class RunAt:
    """A run as a regression names it."""

    run: str
    started: float
    runtime: str  # the HELLO runtime of the check's device
    sdk_source: str
    sdk_commit: str

    @classmethod
    def of(cls, run: RunRecord, case: CaseRecord) -> RunAt:
        return cls(run.name, run.started, case.runtime, run.sdk_source, run.sdk_commit)


@dataclass(frozen=True)
class Regression:
    nodeid: str
    device: str
    outcome: str
    first_failing: RunAt
    last_good: RunAt | None  # None: failing in every run kept
    failing_runs: int
    runtime_label: str = ""  # --runtime

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def regressions(history: History, run: RunRecord) -> list[Regression]:
    found = []
    earlier = history.before(run)
    for key, case in history.of_run(run.id).items():
        if not case.failing:
            continue
        first, failing_runs, last_good = RunAt.of(run, case), 1, None
        for older in reversed(earlier):
            old = history.of_run(older.id).get(key)
            if old is None or not (old.failing or old.outcome == "passed"):
                continue
            if old.outcome == "passed":
                last_good = RunAt.of(older, old)
                break
            first, failing_runs = RunAt.of(older, old), failing_runs + 1
        found.append(
            Regression(key[0], key[1], case.outcome, first, last_good, failing_runs, key[2])
        )
    return sorted(found, key=lambda r: (r.first_failing.started, r.nodeid, r.device))
