"""``suites/`` uses the public interface only: ``harness.options``, ``harness.check`` and
``harness.runner`` (the ``et`` fixture's types), and only the names they export."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SUITES = Path(__file__).resolve().parents[2] / "suites"
PUBLIC = ("harness.options", "harness.check", "harness.runner")


def harness_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) for every import of a harness module in ``path``."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "harness" or node.module.startswith("harness."):
                found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, None)
                for a in node.names
                if a.name == "harness" or a.name.startswith("harness.")
            ]
    return found


def test_suites_import_only_the_public_names_of_the_public_modules():
    exported = {name: set(importlib.import_module(name).__all__) for name in PUBLIC}
    outside = [
        f"{path.name}:{line}: {module}" + (f".{name}" if name else "")
        for path in sorted(SUITES.glob("*.py"))
        for line, module, name in harness_imports(path)
        if module not in exported or name is None or name not in exported[module]
    ]
    assert not outside, "suites/ reach past the public interface: " + ", ".join(outside)


def test_every_exported_name_exists():
    for name in PUBLIC:
        module = importlib.import_module(name)
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, f"{name}.__all__ names what it lacks: {missing}"


def test_the_check_finds_an_import_of_an_internal_module(tmp_path):
    suite = tmp_path / "test_x.py"
    suite.write_text(
        "from harness.data.messages import Request\nimport harness.codec.wire\n"
        "from harness.check import Verdict\n"
    )
    assert harness_imports(suite) == [
        (1, "harness.data.messages", "Request"),
        (2, "harness.codec.wire", None),
        (3, "harness.check", "Verdict"),
    ]


def test_a_map_file_is_read_through_the_public_interface(tmp_path):
    """README's ``from harness.options import load_map``: the map file loader and its error
    are public, where users import maps from."""
    from harness.options import MapFileError, OptionsMap, load_map

    path = tmp_path / "map.yaml"
    path.write_text("backends:\n  XnnpackBackend: {weight_cache_enabled: true}\n")
    assert load_map(path) == OptionsMap.from_dict(
        {"XnnpackBackend": {"weight_cache_enabled": True}}
    )
    path.write_text("backends: []\n")
    with pytest.raises(MapFileError, match=r"map.yaml: backends: a mapping of backend id"):
        load_map(str(path))
