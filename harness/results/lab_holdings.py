"""Who held which labgrid place when, as a run's own record: ``lab-holdings.jsonl``.

Each process appends one line per place it handed back (place, coordinator, holder,
reservation, ``acquired_at`` and ``released_at`` as Unix times) to the results
directory; ``run.json`` lists them all at the end (``lab_holdings``), so hand-over
times and "never two on one place" can be read from a run's records alone.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

HOLDINGS_FILE = "lab-holdings.jsonl"
_MAX_BYTES = 16 * 1024 * 1024  # read at most this much of the file (~60,000 holdings)


def record(results_dir: Path, holding: dict[str, Any]) -> None:
    """Append ``holding`` as one line (one write, so processes do not interleave)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(holding, sort_keys=True) + "\n").encode()
    descriptor = os.open(results_dir / HOLDINGS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


def read(results_dir: Path) -> list[dict[str, Any]]:
    """The holdings recorded in ``results_dir``, by acquisition time; a line that is not
    a holding with a finite ``acquired_at`` (a write cut short by a kill) is skipped."""
    try:
        with open(results_dir / HOLDINGS_FILE, "rb") as file:
            text = file.read(_MAX_BYTES)
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        try:
            holding = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(holding, dict) and _is_time(holding.get("acquired_at")):
            found.append(holding)
    return sorted(found, key=lambda h: h["acquired_at"])


def _is_time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
