"""A chaos run's fault schedule: which fault, on what, when, drawn from the seed alone.

:func:`plan` draws the moments and the (kind, target) pairs from ``random.Random(seed)``
only, so the same seed, duration and targets give the same schedule on any machine; the
run then injects it as far as it gets (a fault whose target is not up at its moment is
*missed*, and said so).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

MEAN_GAP_S = 15.0  # by default, one fault per this many seconds of chaos, on average
MIN_ROUND_S = 90.0  # a later round is started with this much time left: its devices come up
# in ~30-45 s on a loaded 2-core machine, and a health check the run's time stops
# quarantines its device
WARM_UP_S = 30.0  # the devices come up first (pytest, its workers, the emulators): no fault
# before this
QUIET_END = 0.15  # no fault in the last part of the run: retries and restarts end in it
MAX_FAULTS = 10_000


@dataclass(frozen=True, order=True)
class Fault:
    """One fault to inject: ``at_s`` seconds after the run started, ``kind`` on ``target``
    (a device's name, or ``results`` for the run's results disk)."""

    at_s: float
    kind: str
    target: str

    def line(self) -> str:
        return f"{self.at_s:8.2f} s  {self.kind:<16} {self.target}"

    def as_json(self) -> dict[str, object]:
        return {"at_s": self.at_s, "kind": self.kind, "target": self.target}


def plan(
    seed: int, duration_s: float, targets: Iterable[tuple[str, str]], every_s: float = MEAN_GAP_S
) -> tuple[Fault, ...]:
    """The faults of a run of ``duration_s`` seconds over ``targets`` ((kind, target) pairs),
    one per ``every_s`` seconds on average, in time order; the same arguments give the
    same faults."""
    pairs = sorted(set(targets))
    start, end = WARM_UP_S, duration_s * (1.0 - QUIET_END)
    if not pairs or end <= start:
        return ()
    rng = random.Random(seed)
    count = min(MAX_FAULTS, max(1, round((end - start) / every_s)))
    moments = sorted(round(rng.uniform(start, end), 2) for _ in range(count))
    return tuple(Fault(at, *rng.choice(pairs)) for at in moments)
