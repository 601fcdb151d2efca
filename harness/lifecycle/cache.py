"""Where the harness keeps what it downloads, builds and locks (the cache), and what it
must not lose (its data: the run history).

The cache holds only what can be made again: deleting it costs time, nothing else
(docs/lifecycle.md, "The cache and the data").
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.untrusted.value_rules import expand_home

CACHE_ENV = "ET_HARNESS_CACHE"
DATA_ENV = "ET_HARNESS_DATA"


def cache_root() -> Path:
    """The harness cache: ``$ET_HARNESS_CACHE`` or ``~/.cache/et-harness``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return expand_home(override, CACHE_ENV)
    return Path.home() / ".cache" / "et-harness"


def data_root() -> Path:
    """The harness's data folder (the run history): ``$ET_HARNESS_DATA``, else the user
    data directory, ``$XDG_DATA_HOME/et-harness`` or ``~/.local/share/et-harness``."""
    override = os.environ.get(DATA_ENV)
    if override:
        return expand_home(override, DATA_ENV)
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "et-harness"
