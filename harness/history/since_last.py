"""What changed since the last comparable run (same suites on the same devices and
runtimes).

A check is a test on a device with a runtime (``--runtime``; "" the device's own).
Failing is ``failed``, ``error`` or ``xpassed`` (the runtime is wrong); ``infra`` is
device trouble, apart:

- new failures: failing now, not failing (or not run) then;
- fixed: failing then, passed now;
- still failing: failing both times;
- new infra: infrastructure error now, none then;
- quarantines: devices quarantined now (``new`` unless they were then too).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.history.stored_runs import QUARANTINED, CaseRecord, CheckKey, RunRecord
from harness.history.view import History


@dataclass(frozen=True)
class Change:
    nodeid: str
    device: str
    now: str  # outcome in this run
    then: str  # outcome in the previous comparable run, "" if it was not run
    detail: str  # the differences or the infrastructure cause, short
    runtime_label: str = ""

    @classmethod
    def of(cls, now: CaseRecord, then: CaseRecord | None) -> Change:
        detail = now.infra_cause if now.outcome == "infra" else now.differences
        then_outcome = then.outcome if then else ""
        return cls(now.nodeid, now.device, now.outcome, then_outcome, detail, now.runtime_label)


@dataclass(frozen=True)
class Quarantine:
    device: str  # with its runtime in a run across runtimes: host@1.5.0
    new: bool
    cause: str


@dataclass(frozen=True)
class SinceLast:
    run: RunRecord
    previous: RunRecord | None
    new_failures: tuple[Change, ...]
    fixed: tuple[Change, ...]
    still_failing: tuple[Change, ...]
    new_infra: tuple[Change, ...]
    quarantines: tuple[Quarantine, ...]

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["run"] = self.run.as_json()
        data["previous"] = self.previous.as_json() if self.previous else None
        return data


def previous_comparable(history: History, run: RunRecord) -> RunRecord | None:
    """The latest run before ``run`` with the same suites on the same devices and runtimes."""
    return next((r for r in reversed(history.before(run)) if r.comparable(run)), None)


def _quarantined(cases: dict[CheckKey, CaseRecord]) -> dict[str, str]:
    found: dict[str, str] = {}
    for case in cases.values():
        if case.infra_type == QUARANTINED:
            found.setdefault(case.where, case.infra_cause)
    return found


def since_last(history: History, run: RunRecord) -> SinceLast:
    previous = previous_comparable(history, run)
    now = history.of_run(run.id)
    then = history.of_run(previous.id) if previous else {}
    new_failures: list[Change] = []
    fixed: list[Change] = []
    still: list[Change] = []
    new_infra: list[Change] = []
    for key, case in now.items():
        old = then.get(key)
        was_failing = old is not None and old.failing
        if case.failing:
            (still if was_failing else new_failures).append(Change.of(case, old))
        elif case.outcome == "passed" and was_failing:
            fixed.append(Change.of(case, old))
        if case.outcome == "infra" and (old is None or old.outcome != "infra"):
            new_infra.append(Change.of(case, old))
    was_quarantined = _quarantined(then)
    quarantines = tuple(
        Quarantine(device, device not in was_quarantined, cause)
        for device, cause in sorted(_quarantined(now).items())
    )
    return SinceLast(
        run,
        previous,
        tuple(new_failures),
        tuple(fixed),
        tuple(still),
        tuple(new_infra),
        quarantines,
    )
