"""Lifetime on the Module path: what a backend gets is what was given at ``load``.

A caller may release the map it hands to ``Module::load(map)`` or to
``Module::load_method(..., &map)`` as soon as the call returns: the agent then destroys
it and builds another model's map in its storage (the same ids, keys and types, every
value changed; docs/agent.md, "Load paths"). A method loaded lazily afterwards (by
``Module::execute``, or a KEEP load of another method) must still deliver exactly what
was given at ``load``. A runtime that kept a pointer to the caller's map (ExecuTorch
from "4/x: Add LoadBackendOptionsMap support to Module::load()" until "Module
deep-copies LoadBackendOptionsMap on load (#19673)") delivers the other model's values:
each case's failure names the path and the moment the map was released.
"""

from __future__ import annotations

import pytest

from harness.check import LoadPath
from harness.options import BackendOptions, Option, OptionsMap

from .maps import PROBE_NAMES, distinct_map, distinct_options
from .serving import needs

PAIR = ("ProbeA", "ProbeB")


def exactly(verdict, moment: str) -> None:
    """Fail naming the load path and the moment unless the check found no difference."""
    if not verdict.ok:
        pytest.fail(
            f"on load path {verdict.report.fact('load_path')}, {moment}: the backends did not "
            f"get what was given at load\n{verdict.render()}"
        )


def all_types_for_eight() -> OptionsMap:
    """Eight backends, each with options of every type (and a string of 255 bytes)."""
    return OptionsMap(
        tuple(
            BackendOptions(name, (*distinct_options(i, name), Option("text", "t" * 255)))
            for i, name in enumerate(PROBE_NAMES)
        )
    )


def test_module_load_map_released_before_forward_loads_lazily(et):
    needs(et, LoadPath.MODULE)
    exactly(
        et.load(all_types_for_eight(), path=LoadPath.MODULE),
        "the map given to Module::load(map) released (its storage holding another model's "
        "options) before forward loaded lazily in Module::execute",
    )


def test_module_load_map_released_before_another_method_loads_lazily(et):
    needs(et, LoadPath.MODULE)
    exactly(et.load(distinct_map(PAIR), path=LoadPath.MODULE), "forward, loaded first")
    later = OptionsMap.from_dict({"ProbeA": {"later": 7, "on": True}, "ProbeB": {"s": "b"}})
    exactly(
        et.load(later, path=LoadPath.MODULE, keep=True, method="second"),
        "the map given to a second Module::load(map) released before 'second' loaded lazily",
    )


def test_explicit_map_released_after_load_method_leaves_the_stored_map(et):
    needs(et, LoadPath.MODULE_BOTH, LoadPath.MODULE)
    stored = distinct_map(PAIR)
    explicit = OptionsMap.from_dict({"ProbeA": {"explicit": True}, "ProbeB": {"threads": 3}})
    exactly(
        et.load(explicit, path=LoadPath.MODULE_BOTH, stored=stored),
        "Module::load(stored) released before Module::load_method(forward, &explicit)",
    )
    again = OptionsMap.from_dict({"ProbeA": {"again": 1}, "ProbeB": {"again": 2}})
    exactly(
        et.load(again, path=LoadPath.MODULE, keep=True, method="second"),
        "both maps of forward's load released (their storage holding other models' options) "
        "before 'second' loaded lazily",
    )
