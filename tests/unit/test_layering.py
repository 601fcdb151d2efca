"""The layers import one way: every package only from the layers below it, no circle
between modules, the extras' lines held, and the device kinds found through entry points
(docs/architecture.md, "Layers").

Every import counts: at module level, inside a function, and under ``TYPE_CHECKING``. The
checks run over the sources as data, so the planted tests can show that each one fails.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"

# Bottom to top: a package (or top-level module) imports only from the layers below its
# own, and from itself. A new package gets its line here.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "errors",
        "__init__ shipped extras",
        "untrusted",
        "lifecycle data",
        "transport codec",
        "runtime check",
        "channel programs",
        "session profiles",
        "emulators",
        "devices",
        "results",
        "runner lab",
        "farm history options",
        "chaos",
        "pytest_plugin cli",
    )
)
# The lab's own command-line tools: each starts a lab, so it imports lab/ at module level;
# nothing imports them at module level.
LAB_TOOLS = frozenset({"harness.cli.lab_benchmark", "harness.cli.lab_scale"})


@dataclass(frozen=True)
class Arrow:
    """``source`` imports ``target`` (both modules of the harness)."""

    source: str
    target: str
    line: int
    at_module_level: bool


def sources(root: Path = HARNESS) -> dict[str, str]:
    """Module name -> its source, for every module of the package at ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path.read_text(encoding="utf-8")
    return found


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [f"{node.module}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return []


def _statements(node: ast.AST, runs: bool = True) -> Iterator[tuple[ast.AST, bool]]:
    """Every node below ``node``, and whether it runs when the module is imported (not in
    a function and not under ``if TYPE_CHECKING``)."""
    for child in ast.iter_child_nodes(node):
        yield child, runs
        inner = runs and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            inner = False
        yield from _statements(child, inner)


@functools.cache
def _parsed(source: str) -> ast.Module:
    return ast.parse(source)


@functools.cache
def _imports_of(source: str) -> tuple[tuple[str, int, bool], ...]:
    """(imported name, line, runs at import) for every import in ``source``."""
    return tuple(
        (imported, getattr(node, "lineno", 0), at_module_level)
        for node, at_module_level in _statements(_parsed(source))
        for imported in _imported(node)
    )


def arrows(modules: Mapping[str, str]) -> list[Arrow]:
    """Every import between modules of ``modules`` (name -> source)."""
    found: dict[tuple[str, str, int], Arrow] = {}
    for name, source in modules.items():
        for imported, line, at_module_level in _imports_of(source):
            target = imported
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # a module importing its own package's __init__ is not an arrow
            if target and target != name and not name.startswith(target + "."):
                found[name, target, line] = Arrow(name, target, line, at_module_level)
    return list(found.values())


def unit_of(module: str) -> str:
    """``harness.channel.serial.arq`` -> ``channel``; ``harness`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(unit: str) -> int:
    for place, layer in enumerate(LAYERS):
        if unit in layer:
            return place
    raise AssertionError(f"harness/{unit} has no layer: give it its line in LAYERS")


def upward(found: list[Arrow]) -> list[str]:
    """The arrows from a layer to one above it."""
    return [
        f"{a.source}:{a.line} imports {a.target}"
        for a in found
        if layer_of(unit_of(a.target)) > layer_of(unit_of(a.source))
        or (
            unit_of(a.source) != unit_of(a.target)
            and layer_of(unit_of(a.target)) == layer_of(unit_of(a.source))
        )
    ]


def circles(found: list[Arrow]) -> list[list[str]]:
    """The modules that import each other, round (strongly connected components)."""
    graph: dict[str, set[str]] = {}
    for arrow in found:
        graph.setdefault(arrow.source, set()).add(arrow.target)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    result: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return result


def lab_outside_its_line(found: list[Arrow]) -> list[str]:
    """Module-level imports of lab/ (the [lab] extra) or of its tools from elsewhere; lab/
    importing an emulator."""
    return [
        f"{a.source}:{a.line} imports {a.target}"
        for a in found
        if (
            a.at_module_level
            and (unit_of(a.target) == "lab" or a.target in LAB_TOOLS)
            and unit_of(a.source) != "lab"
            and a.source not in LAB_TOOLS
        )
        or (unit_of(a.source) == "lab" and unit_of(a.target) == "emulators")
    ]


HARNESS_ARROWS = arrows(sources())


def test_every_layer_imports_only_the_layers_below():
    assert not upward(HARNESS_ARROWS)


def test_no_circle_between_modules():
    assert not circles(HARNESS_ARROWS)


def test_transport_uses_only_errors_lifecycle_and_untrusted():
    used = {unit_of(a.target) for a in HARNESS_ARROWS if unit_of(a.source) == "transport"}
    assert used <= {"errors", "lifecycle", "untrusted", "transport"}


def test_the_error_root_imports_nothing_of_the_harness():
    assert not [a for a in HARNESS_ARROWS if a.source == "harness.errors"]


def test_the_lab_extra_is_imported_only_where_a_lab_is_used():
    assert not lab_outside_its_line(HARNESS_ARROWS)


def test_a_planted_import_back_up_a_circle_and_a_lab_import_are_each_found():
    modules = sources()
    planted = {
        **modules,
        "harness.runtime.planted": "from harness.farm.slot import DeviceSlot\n",
        "harness.data.planted_a": "import harness.data.planted_b\n",
        "harness.data.planted_b": "def f():\n    from harness.data import planted_a\n",
        "harness.results.planted": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from harness.runner import CaseRunner\n"
        ),
        "harness.farm.planted": "from harness.lab.places import LabIdentity\n",
        "harness.lab.planted": "def f():\n    from harness.emulators.ssh import SshEmulator\n",
    }
    found = arrows(planted)
    assert sorted(set(upward(found)) - set(upward(HARNESS_ARROWS))) == [
        "harness.results.planted:3 imports harness.runner",
        "harness.runtime.planted:1 imports harness.farm.slot",
    ]
    assert [c for c in circles(found) if c not in circles(HARNESS_ARROWS)] == [
        ["harness.data.planted_a", "harness.data.planted_b"]
    ]
    assert sorted(set(lab_outside_its_line(found)) - set(lab_outside_its_line(HARNESS_ARROWS))) == [
        "harness.farm.planted:1 imports harness.lab.places",
        "harness.lab.planted:2 imports harness.emulators.ssh",
    ]


def _entry_points() -> dict[str, dict[str, str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {"scripts": project["scripts"], **project["entry-points"]}


def test_entry_points_name_modules_in_their_layer():
    """The kinds are loaded through entry points: each names a module of devices/, whose own
    imports the tests above hold; the plugin and the command are the top layer."""
    modules = sources()
    points = _entry_points()
    kinds = points["et_harness.device_kinds"]
    assert kinds and all(target in modules for target in kinds.values()), kinds
    assert {unit_of(target) for target in kinds.values()} == {"devices"}
    assert points["pytest11"] == {"et_harness": "harness.pytest_plugin"}
    assert unit_of(points["scripts"]["et-harness"].partition(":")[0]) == "cli"


def test_no_module_is_imported_by_a_name_it_builds():
    """``importlib.import_module`` with a harness name hides an arrow from the tests above:
    kinds come through entry points."""
    hidden = [
        f"{name}:{node.lineno}"
        for name, source in sources().items()
        for node in ast.walk(_parsed(source))
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("import_module")
        and "harness" in ast.unparse(node.args[0] if node.args else node)
    ]
    assert not hidden
