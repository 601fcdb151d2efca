"""The layers import one way: no cycle between packages, transport/ below the protocol, the
error root (harness/errors.py) below everything."""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
PACKAGES = sorted(p.name for p in HARNESS.iterdir() if (p / "__init__.py").is_file())


def unit_of(module: str) -> str:
    """``harness.channel.serial.arq`` -> ``link``; a top-level module is its own unit."""
    return module.split(".")[1] if module.count(".") >= 1 else module


def imports() -> dict[str, set[str]]:
    """Unit -> the harness units its modules import (function-level imports included)."""
    graph: dict[str, set[str]] = {}
    for path in HARNESS.rglob("*.py"):
        module = ".".join(path.relative_to(HARNESS.parent).with_suffix("").parts)
        unit = unit_of(module.removesuffix(".__init__"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                if node.module == "harness":
                    names = [f"harness.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                if name.startswith("harness.") and unit_of(name) != unit:
                    graph.setdefault(unit, set()).add(unit_of(name))
    return graph


def test_transport_imports_nothing_from_the_protocol_or_config_layers():
    below = {"errors", "lifecycle", "untrusted"}
    assert imports().get("transport", set()) <= below


def test_no_cycle_between_packages():
    graph = imports()

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(p for p in PACKAGES if reaches(p, p, {p}))
    assert not cycles, {p: sorted(graph.get(p, ())) for p in cycles}


def test_the_error_root_imports_nothing_of_the_harness():
    assert "errors" not in imports()
