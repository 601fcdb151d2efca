"""What a chaos run leaves in its folder (``chaos.json``), and its invariants from it.

``et-harness chaos --check FOLDER`` checks a finished run again from this record: its
rounds' files, its faults, and the ownership records of its harness processes (so a
process one of them started and left running is still found then).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.chaos.invariants import (
    Injection,
    Invariant,
    Round,
    fault_counts,
    no_lost_result,
    no_wrong_verdict,
    nothing_left_running,
    same_faults,
)
from harness.chaos.schedule import Fault, plan
from harness.errors import UsageError
from harness.lifecycle.reap import OwnerRecord
from harness.untrusted.reading import InputFileError, read_bounded_text

RECORD_NAME = "chaos.json"
MAX_RECORD_BYTES = 64 << 20


class ChaosRecordError(ValueError, UsageError):
    """A folder holds no readable chaos record; the message says which file and why."""


@dataclass(frozen=True)
class ChaosRecord:
    """A chaos run as it happened: its seed and targets, faults, rounds and owners."""

    seed: int
    duration_s: float
    every_s: float  # one fault per this many seconds, on average
    targets: tuple[tuple[str, str], ...]
    injected: tuple[Injection, ...]
    rounds: tuple[Round, ...]
    owners: tuple[OwnerRecord, ...]
    notes: tuple[str, ...] = ()  # what the run found itself (a round that overran)

    def invariants(self) -> list[Invariant]:
        planned = plan(self.seed, self.duration_s, self.targets, self.every_s)
        return [
            no_wrong_verdict(self.rounds, self.injected),
            no_lost_result(self.rounds),
            nothing_left_running(self.owners, self.notes),
            same_faults(planned, self.injected, self.rounds),
        ]

    def lines(self, invariants: Sequence[Invariant]) -> list[str]:
        """The invariants with the seed, and the faults of each kind."""
        held = all(i.held for i in invariants)
        lines = [
            f"chaos: seed {self.seed}, {self.duration_s:g} s, {len(self.rounds)} "
            f"round(s): invariants {'held' if held else 'BROKEN'}"
        ]
        for invariant in invariants:
            lines += invariant.lines()
        counts = fault_counts(self.injected)
        shown = [
            f"{kind} {hit}" + (f" ({missed} missed)" if missed else "")
            for kind, (hit, missed) in counts.items()
        ]
        lines.append(f"  faults injected: {', '.join(shown) or 'none'}")
        return lines

    def save(self, folder: Path) -> Path:
        data = {
            "seed": self.seed,
            "duration_s": self.duration_s,
            "every_s": self.every_s,
            "targets": [list(pair) for pair in self.targets],
            "injected": [
                {**i.fault.as_json(), "at": i.at, "hit": list(i.hit)} for i in self.injected
            ],
            "rounds": [
                {
                    "results": str(r.results),
                    "junit": str(r.junit),
                    "started": r.started,
                    "ended": r.ended,
                }
                for r in self.rounds
            ],
            "owners": [json.loads(owner.to_json()) for owner in self.owners],
            "notes": list(self.notes),
        }
        path = folder / RECORD_NAME
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return path


def load_record(folder: Path) -> ChaosRecord:
    """The chaos record in ``folder``, read within bounds."""
    path = folder / RECORD_NAME
    try:
        data = json.loads(read_bounded_text(path, MAX_RECORD_BYTES))
        return ChaosRecord(
            seed=int(data["seed"]),
            duration_s=float(data["duration_s"]),
            every_s=float(data["every_s"]),
            targets=tuple((str(k), str(t)) for k, t in data["targets"]),
            injected=tuple(
                Injection(
                    Fault(float(i["at_s"]), str(i["kind"]), str(i["target"])),
                    float(i["at"]),
                    tuple(str(h) for h in i["hit"]),
                )
                for i in data["injected"]
            ),
            rounds=tuple(
                Round(Path(r["results"]), Path(r["junit"]), float(r["started"]), float(r["ended"]))
                for r in data["rounds"]
            ),
            owners=tuple(OwnerRecord.from_json(json.dumps(o)) for o in data["owners"]),
            notes=tuple(str(note) for note in data.get("notes", [])),
        )
    except InputFileError as exc:
        raise ChaosRecordError(f"{exc}; give the folder of a chaos run") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ChaosRecordError(
            f"{path}: not a chaos record ({type(exc).__name__}: {exc}); give the folder of a "
            "chaos run, or run it again"
        ) from None
