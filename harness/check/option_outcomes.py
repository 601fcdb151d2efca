"""What each option of a map did in a program check, one row per backend and option:
delivered exactly, outputs unchanged, effect observed (the report's "what the options
did"; docs/agent.md, "The effect check").

Each is True, False, or None where it does not apply or could not be judged: the
outputs of an option nothing declares (unjudged), the effect of an option whose class is
not a file, or a file that could not be looked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.check.output_effects import FileObservation, Judged, OutputEffect
from harness.check.verdict import Verdict
from harness.data.effects import Changes
from harness.data.options import OptionsMap


@dataclass(frozen=True)
class OptionOutcome:
    """One option of the map, over every method, load path and route of a check."""

    backend: str
    key: str
    effect: str  # what it may change (OptionEffect.describe()); "" if unjudged
    delivered: bool | None  # every load delivered its backend's options exactly
    unchanged: bool | None  # no output changed beyond what it may change
    observed: bool | None  # its declared file was left by every load looked at

    def describe(self) -> str:
        """``XnnpackBackend option packed_cache_path (a file at its path): delivered ✓,
        outputs unchanged ✓, effect observed ✗`` (- where it does not apply)."""
        what = f" ({self.effect})" if self.effect else " (unjudged)"
        return (
            f"{self.backend} option {self.key}{what}: delivered {mark(self.delivered)}, "
            f"outputs unchanged {mark(self.unchanged)}, effect observed {mark(self.observed)}"
        )


def mark(value: bool | None) -> str:
    """✓, ✗, or - (does not apply, or could not be judged)."""
    return "-" if value is None else "✓" if value else "✗"


def option_outcomes(
    options: OptionsMap,
    judged: Judged,
    verdicts: Sequence[Verdict],
    effects: Sequence[OutputEffect],
    files: Sequence[FileObservation],
) -> tuple[OptionOutcome, ...]:
    """One :class:`OptionOutcome` per option of ``options``, in map order."""
    rows = []
    for entry in options.backends:
        name = entry.backend_id
        exact = [b.ok for v in verdicts for b in v.backends if b.name == name]
        for option in entry.options:
            effect = judged.get((name, option.key))
            blamed = any(
                e.judged and any(b == name and k == option.key for b, k, _ in e.options)
                for e in effects
            )
            seen = [f.observed for f in files if (f.backend, f.key) == (name, option.key)]
            file = effect is not None and effect.changes is Changes.FILE
            rows.append(
                OptionOutcome(
                    name,
                    option.key,
                    "" if effect is None else effect.describe(),
                    all(exact) if exact else None,
                    None if effect is None else not blamed,
                    combine(seen) if file else None,
                )
            )
    return tuple(rows)


def combine(seen: Iterable[bool | None]) -> bool | None:
    """False if any is False, True if any is True and none False, None otherwise."""
    looked = [s for s in seen if s is not None]
    return all(looked) if looked else None
