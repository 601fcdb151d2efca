"""Device and lab-place health over time: per run, how many tests passed, failed, or
ended in device trouble, how many were skipped or failed as expected (neither counts
against the pass rate), and whether the device was quarantined."""

from __future__ import annotations

import collections
from dataclasses import asdict, dataclass
from typing import Any

from harness.history.stored_runs import QUARANTINED
from harness.history.view import History


@dataclass(frozen=True)
class HealthPoint:
    run: str
    started: float
    tests: int
    passed: int
    failing: int
    infra: int
    skipped: int
    xfailed: int  # failed as the test's xfail mark expected
    quarantined: bool
    case_time: float  # seconds, the tests' durations summed

    @property
    def infra_rate(self) -> float:
        return self.infra / self.tests if self.tests else 0.0

    @property
    def judged(self) -> int:
        """The tests that could pass: neither skipped nor expected to fail."""
        return self.tests - self.skipped - self.xfailed

    @property
    def pass_rate(self) -> float:
        """Passed over :attr:`judged` (1.0 when none was: nothing failed)."""
        return self.passed / self.judged if self.judged else 1.0


@dataclass(frozen=True)
class Health:
    kind: str  # device, place or backend
    name: str
    points: tuple[HealthPoint, ...]  # oldest first

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        for point, row in zip(self.points, data["points"], strict=True):
            row["infra_rate"] = round(point.infra_rate, 4)
            row["pass_rate"] = round(point.pass_rate, 4)
            row["judged"] = point.judged
        return data


def health(history: History, kind: str) -> list[Health]:
    """Per device, place or backend (``kind``), a point per run it was in."""
    series: dict[str, list[HealthPoint]] = collections.defaultdict(list)
    for run in history.runs:
        groups: dict[str, list[Any]] = collections.defaultdict(list)
        for case in history.cases.get(run.id, ()):
            names = {"device": [case.device], "place": [case.place], "backend": case.backends}
            for name in names[kind]:
                if name:
                    groups[name].append(case)
        for name, mine in groups.items():
            series[name].append(
                HealthPoint(
                    run=run.name,
                    started=run.started,
                    tests=len(mine),
                    passed=sum(1 for c in mine if c.outcome == "passed"),
                    failing=sum(1 for c in mine if c.failing),
                    infra=sum(1 for c in mine if c.outcome == "infra"),
                    skipped=sum(1 for c in mine if c.outcome == "skipped"),
                    xfailed=sum(1 for c in mine if c.outcome == "xfailed"),
                    quarantined=any(c.infra_type == QUARANTINED for c in mine),
                    case_time=round(sum(c.duration for c in mine), 6),
                )
            )
    return [Health(kind, name, tuple(points)) for name, points in sorted(series.items())]
