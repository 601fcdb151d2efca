"""Where the harness keeps what it downloads, builds and locks."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The harness cache: ``$ET_HARNESS_CACHE`` or ``~/.cache/et-harness``."""
    override = os.environ.get("ET_HARNESS_CACHE")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "et-harness"
