"""Bisect results kept for the history: each ``et-harness bisect`` writes one JSON file
into the harness's data folder (``bisects/``, beside the history, so that deleting the
cache keeps them); ``et-harness history`` shows the newest result whose device and tests
match beside each failure's first failing run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness.lifecycle.cache import data_root

KEPT = 200  # the newest results kept; older ones are removed when a new one is written


def bisects_dir() -> Path:
    return data_root() / "bisects"


def keep_bisect(result: dict[str, Any]) -> Path:
    """Write ``result`` (the bisect's JSON) and drop the oldest beyond :data:`KEPT`."""
    directory = bisects_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**9:09d}.json"
    path.write_text(json.dumps(result, indent=2), "utf-8")
    for old in sorted(directory.glob("*.json"))[:-KEPT]:
        old.unlink(missing_ok=True)
    return path


def kept_bisects() -> list[dict[str, Any]]:
    """Every kept result, newest first; unreadable files are passed over."""
    found = []
    for path in sorted(bisects_dir().glob("*.json"), reverse=True):
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("found"), dict):
            found.append(data)
    return found


def explaining(nodeid: str, device: str, results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest result (not ``--find-fix``) on ``device`` whose selection names the
    test: a path or node id the test's id starts with."""
    for result in results:
        if result.get("find_fix") or result.get("device") != device:
            continue
        names = [s for s in result.get("selection", []) if not str(s).startswith("-")]
        if any(nodeid.startswith(str(name).rstrip("/")) for name in names):
            return result
    return None


def bisect_line(result: dict[str, Any]) -> str:
    """``bisected: first bad <hash> <subject> (upstream ...), N builds`` ("cannot tell; the
    search stopped at <hash> ..." when the bisect was not sure)."""
    found = result["found"]
    upstream = f" (upstream {found['upstream']})" if found.get("upstream") else ""
    unsure = result.get("cannot_tell") or result.get("undecided_among")
    named = "cannot tell; the search stopped at" if unsure else "first bad"
    return (
        f"bisected in {result.get('tree', '?')}: {named} {str(found['hash'])[:12]} "
        f"{found.get('subject', '')}{upstream}; {result.get('builds', '?')} builds"
    )
