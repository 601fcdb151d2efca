"""Flaky checks: outcomes that flip between passing and failing with nothing changed.

Across the last N runs, a check (test on a device with a runtime) is looked at per
runtime version (what HELLO announces) and agent version, so a change of runtime is a
regression or a fix, not flakiness. Of its
outcomes in run order only ``passed`` and failing ones count (infrastructure errors
and skips say nothing about the check); the check is flaky when they flip at least
twice (pass, fail, pass or fail, pass, fail): a single flip is a regression or a fix.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

from harness.history.view import History

MIN_FLIPS = 2


@dataclass(frozen=True)
class FlakyCheck:
    nodeid: str
    device: str
    runtime: str
    agent_version: str
    outcomes: tuple[tuple[str, str], ...]  # (run name, outcome), oldest first
    flips: int
    runtime_label: str = ""  # --runtime

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def flaky_checks(history: History, window: int) -> list[FlakyCheck]:
    """The flaky checks of the last ``window`` runs, most flips first."""
    seen: dict[tuple[str, str, str, str, str], list[tuple[str, str]]] = {}
    for run in history.runs[-window:]:
        for case in history.cases.get(run.id, ()):
            if case.outcome != "passed" and not case.failing:
                continue
            key = (*case.key, case.runtime, case.agent_version)
            seen.setdefault(key, []).append((run.name, case.outcome))
    found = []
    for (nodeid, device, label, runtime, agent), outcomes in seen.items():
        passing = [outcome == "passed" for _, outcome in outcomes]
        flips = sum(1 for a, b in itertools.pairwise(passing) if a != b)
        if flips >= MIN_FLIPS:
            found.append(FlakyCheck(nodeid, device, runtime, agent, tuple(outcomes), flips, label))
    return sorted(found, key=lambda f: (-f.flips, f.nodeid, f.device))
