"""Who held which labgrid place when, as a run's own record: ``lab-holdings.jsonl``.

Each process appends one line per place it handed back (place, coordinator, holder,
reservation, ``acquired_at`` and ``released_at`` as Unix times) to the results
directory; ``run.json`` lists them all at the end (``lab_holdings``), so hand-over
times and "never two on one place" can be read from a run's records alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

HOLDINGS_FILE = "lab-holdings.jsonl"
_MAX_LINES = 100_000


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
    """The holdings recorded in ``results_dir``, by acquisition time (a cut line skipped)."""
    try:
        text = (results_dir / HOLDINGS_FILE).read_text("utf-8")
    except OSError:
        return []
    found = []
    for line in text.splitlines()[:_MAX_LINES]:
        try:
            holding = json.loads(line)
        except ValueError:
            continue  # a process killed in its write
        if isinstance(holding, dict):
            found.append(holding)
    return sorted(found, key=lambda h: float(h.get("acquired_at") or 0))
