"""What an option may change (its effect class), as the contracts, contract files and map
files declare it (docs/map-files.md, "What an option may change").

* ``nothing``: result-invariant (caches, workspaces, threads, performance and log
  settings): with it, every output element equals the run without it, bit for bit;
* ``numerics``: the outputs may move, each element within ``tolerance`` (relative and
  absolute) of the run without it;
* ``file``: result-invariant, and a load with it leaves a file at the path its value
  names (``when`` the backend's other options listed are in the same map with those
  values): a load that leaves none is a failure.

:func:`parse_effect` reads the fields ``effect``, ``tolerance`` and ``when`` of an
untrusted document; its :class:`EffectFieldError` names the field, the caller the file.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

from harness.data.options import MAX_KEY_BYTES, OptionValue
from harness.errors import UsageError
from harness.untrusted.reading import brief

FIELDS = ("effect", "tolerance", "when")
MAX_TOLERANCE = 1.0  # beyond it an option may change anything: declare no class
MAX_WHEN = 8  # options a file effect may depend on


class Changes(enum.Enum):
    """What an option may change."""

    NOTHING = "nothing"
    NUMERICS = "numerics"
    FILE = "file"


@dataclass(frozen=True)
class OptionEffect:
    """What one option may change: its class, the tolerance of ``numerics`` and the
    options a ``file`` effect needs beside it (key, value) in the same map."""

    changes: Changes = Changes.NOTHING
    tolerance: float = 0.0
    when: tuple[tuple[str, OptionValue], ...] = ()

    def describe(self) -> str:
        """``result-invariant``, ``numerics within 0.001``, ``a file at its path, with
        weight_cache_enabled=True``."""
        if self.changes is Changes.NUMERICS:
            return f"numerics within {self.tolerance:g}"
        if self.changes is Changes.FILE:
            needs = ", ".join(f"{k}={v!r}" for k, v in self.when)
            return "a file at its path" + (f", with {needs}" if needs else "")
        return "result-invariant"

    def applies(self, others: Mapping[str, OptionValue]) -> bool:
        """Whether a ``file`` effect is due with the backend's ``others`` options."""
        return all(key in others and others[key] == value for key, value in self.when)


RESULT_INVARIANT = OptionEffect()


@dataclass(frozen=True)
class DeclaredEffect:
    """An effect a map file declares for one option, and where (``map.yaml:
    backends.NpuBackend[0]``), for the message that refuses it."""

    effect: OptionEffect
    where: str


class EffectFieldError(UsageError):
    """A field of an effect that cannot be: ``field`` names it, the text says the fix."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def parse_effect(fields: Mapping[object, object]) -> OptionEffect:
    """The effect ``fields`` (untrusted) declare: ``effect`` (nothing, numerics, file),
    ``tolerance`` (numerics only, a float in (0, 1]) and ``when`` (file only, a mapping of
    the backend's other keys to their values)."""
    name = fields.get("effect", Changes.NOTHING.value)
    names = ", ".join(c.value for c in Changes)
    changes = next((c for c in Changes if c.value == name), None)
    if changes is None:
        raise EffectFieldError("effect", f"one of {names}; got {brief(name)}")
    tolerance = fields.get("tolerance")
    if (tolerance is None) == (changes is Changes.NUMERICS):
        raise EffectFieldError(
            "tolerance", "a numerics effect has a tolerance (e.g. 0.001), no other one has"
        )
    if tolerance is not None and not (
        type(tolerance) in (int, float)
        and math.isfinite(tolerance)  # type: ignore[arg-type]
        and 0 < tolerance <= MAX_TOLERANCE  # type: ignore[operator]
    ):
        raise EffectFieldError(
            "tolerance", f"a number in (0, {MAX_TOLERANCE:g}], e.g. 0.001; got {brief(tolerance)}"
        )
    when = fields.get("when", {})
    if when and changes is not Changes.FILE:
        raise EffectFieldError("when", "only a file effect depends on other options")
    if not isinstance(when, Mapping) or len(when) > MAX_WHEN:
        raise EffectFieldError(
            "when", f"a mapping of at most {MAX_WHEN} keys to values; got {brief(when)}"
        )
    for key, value in when.items():
        if type(key) is not str or not 1 <= len(key.encode()) <= MAX_KEY_BYTES:
            raise EffectFieldError("when", f"a key of 1..{MAX_KEY_BYTES} bytes; got {brief(key)}")
        if type(value) not in (bool, int, str):
            raise EffectFieldError(f"when.{key}", f"a bool, int or string; got {brief(value)}")
    pairs = tuple((str(k), v) for k, v in when.items())
    return OptionEffect(changes, float(tolerance or 0.0), pairs)  # type: ignore[arg-type]
