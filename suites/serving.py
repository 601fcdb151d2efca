"""Skipping a test whose load paths the device's agent does not serve, with the reason."""

from __future__ import annotations

import pytest

from harness.check import LoadPath


def needs(et, *paths: LoadPath, keep: bool = True) -> None:
    """Skip unless the agent serves ``paths`` (and, with ``keep``, the KEEP flag); the
    reason names what the runtime lacks when HELLO says (a runtime from a source tree)."""
    missing = [p.label for p in paths if p not in et.load_paths]
    if missing:
        pytest.skip(f"the device's agent does not serve load paths {missing}{_lacks(et)}")
    if keep and "keep" not in et.load_flags:
        pytest.skip("the device's agent does not honour LOAD's KEEP flag (HELLO load_flags)")


def needs_a_load_path(et) -> None:
    """Skip where the agent serves no load path at all (its runtime lacks the map)."""
    if not et.load_paths:
        pytest.skip(f"the device's agent serves no load path{_lacks(et)}")


def _lacks(et) -> str:
    lacks = et.hello.fact("lacks")
    return f": the runtime lacks {lacks}" if isinstance(lacks, str) and lacks else ""
