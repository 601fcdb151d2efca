"""The processes still carrying a token in their environment: what a run started (its
children inherit the environment) and left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path


def carrying(variable: str, token: str) -> set[int]:
    """Every process but this one whose environment holds ``variable=token``."""
    needle = f"{variable}={token}\0".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes() + b"\0":
                    found.add(int(entry.name))
            except OSError:
                continue
    return found - {os.getpid()}


def left_after(variable: str, token: str, within_s: float) -> set[int]:
    """What still carries the token once ``within_s`` seconds have passed, or nothing as
    soon as nothing does: a run's janitor ends a moment after the run, once it has reaped."""
    deadline = time.monotonic() + within_s
    while (left := carrying(variable, token)) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the janitor's exit, not waiting a guessed time
    return left
