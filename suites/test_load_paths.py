"""What each load path does with the maps it is given, as ExecuTorch documents it.

``extension::Module`` (``module.h``, 1.5.x): ``Module::load(map)`` deep-copies the map,
so the caller may release it at once (the agent overwrites the caller's option arrays
right after the call, before the method is loaded); an explicit map on ``load_method``
replaces the stored one wholly and an explicit empty map delivers nothing; a method
already loaded is not initialised again, so ``Module::load(mapB)`` after it leaves its
delegates on what they got, while methods loaded later get mapB. Each case names the
map every ``init`` must see and the check compares exactly.
"""

from __future__ import annotations

import pytest

from harness.check import DifferenceKind, LoadPath, Outcome, Request, RuntimeErrorCode
from harness.options import BackendOptions, Option, OptionsMap

from .maps import PROBE_NAMES, distinct_map, distinct_options, single
from .serving import needs

PAIR = ("ProbeA", "ProbeB")
MODULE_PATHS = [p for p in LoadPath if p is not LoadPath.PROGRAM]


def shifted(names: tuple[str, ...], by: int) -> OptionsMap:
    """Like distinct_map, with every value different from distinct_map's."""
    return OptionsMap(
        tuple(
            BackendOptions(n, (*distinct_options(i + by, n), Option("map", f"shift-{by}")))
            for i, n in enumerate(names)
        )
    )


def test_module_load_keeps_its_own_copy_of_a_map_the_caller_released(et):
    needs(et, LoadPath.MODULE, keep=False)
    every_type = OptionsMap(
        tuple(
            BackendOptions(name, (*distinct_options(i, name), Option("text", "t" * 255)))
            for i, name in enumerate(PROBE_NAMES)
        )
    )
    verdict = et.load(every_type, path=LoadPath.MODULE)
    verdict.raise_for_differences()
    received = [o.key for e in verdict.report.entries for o in e.options]
    assert "etb.released" not in received and len(received) == 8 * 5


def test_stored_copy_survives_the_caller_and_serves_a_method_loaded_later(et):
    """Module::load(A) with A released at once; a later KEEP that stores A again and
    loads ``second`` still delivers A exactly (the copy, not the caller's arrays)."""
    needs(et, LoadPath.MODULE)
    first = distinct_map(PAIR)
    et.load(first, path=LoadPath.MODULE).raise_for_differences()
    et.load(first, path=LoadPath.MODULE, keep=True, method="second").raise_for_differences()


def test_explicit_map_replaces_the_stored_map_wholly(et):
    needs(et, LoadPath.MODULE_BOTH, keep=False)
    stored = distinct_map(("ProbeA", "ProbeB", "ProbeC"))
    explicit = single("ProbeA", Option("explicit", True), Option("threads", 42))
    verdict = et.load(
        explicit, delegates=("ProbeA", "ProbeB", "ProbeC"), path=LoadPath.MODULE_BOTH, stored=stored
    )
    verdict.raise_for_differences()
    assert [(e.name, e.options) for e in verdict.report.entries] == [
        ("ProbeA", explicit.backends[0].options),
        ("ProbeB", ()),
        ("ProbeC", ()),
    ]


def test_explicit_empty_map_delivers_nothing(et):
    needs(et, LoadPath.MODULE_BOTH, keep=False)
    verdict = et.load(
        OptionsMap(), delegates=PAIR, path=LoadPath.MODULE_BOTH, stored=distinct_map(PAIR)
    )
    verdict.raise_for_differences()
    assert [(e.name, e.calls, e.options) for e in verdict.report.entries] == [
        ("ProbeA", 1, ()),
        ("ProbeB", 1, ()),
    ]


@pytest.mark.parametrize(
    "second_path", [LoadPath.MODULE, LoadPath.MODULE_BOTH], ids=lambda p: p.label
)
def test_module_load_after_a_method_is_loaded_only_reaches_methods_loaded_later(
    et, probe_program, second_path
):
    needs(et, LoadPath.MODULE, second_path)
    map_a, map_b = distinct_map(PAIR), shifted(PAIR, 10)
    et.load(map_a, path=LoadPath.MODULE).raise_for_differences()
    # Module::load(mapB) stored; on module_both forward is also asked for with mapB
    # as the explicit map. forward is loaded, so its delegates are not initialised
    # again: they stay on map A's options (which the check above saw them get).
    # Sent raw: no init is the expected outcome, not a delivery to check.
    reloaded = et.send(
        Request.load(
            probe_program(PAIR),
            PAIR,
            map_b,
            path=second_path,
            keep=True,
            method_options=map_b if second_path is LoadPath.MODULE_BOTH else None,
        )
    )
    assert reloaded.outcome is Outcome.OK, reloaded.message
    assert [(e.name, e.calls, e.executes, e.options) for e in reloaded.entries] == [
        ("ProbeA", 0, 1, ()),
        ("ProbeB", 0, 1, ()),
    ]
    # A method loaded now gets map B, exactly.
    stored = map_b if second_path is LoadPath.MODULE_BOTH else None
    et.load(
        map_b, path=second_path, keep=True, method="second", stored=stored
    ).raise_for_differences()


def test_second_module_load_replaces_the_stored_entries_it_names_and_drops_the_rest(et):
    """Setting a backend id again replaces its whole list; ids the new map lacks go."""
    needs(et, LoadPath.MODULE)
    first = OptionsMap.from_dict({"ProbeA": {"a": 1, "keep_me": True}, "ProbeB": {"b": 1}})
    et.load(first, path=LoadPath.MODULE).raise_for_differences()
    second = single("ProbeA", Option("a", 2))
    verdict = et.load(second, delegates=PAIR, path=LoadPath.MODULE, keep=True, method="second")
    verdict.raise_for_differences()
    assert verdict.report.entry("ProbeB").options == ()


def test_module_method_explicit_map_is_not_stored_for_later_methods(et):
    """Module::load_method(forward, &map) uses the map for that method only: ``second``
    loaded lazily afterwards gets the (empty) stored map."""
    needs(et, LoadPath.MODULE_METHOD, LoadPath.MODULE)
    et.load(distinct_map(PAIR), path=LoadPath.MODULE_METHOD).raise_for_differences()
    verdict = et.load(
        OptionsMap(), delegates=PAIR, path=LoadPath.MODULE, keep=True, method="second"
    )
    verdict.raise_for_differences()


def test_program_path_gives_each_method_the_map_it_was_loaded_with(et):
    needs(et, LoadPath.PROGRAM)
    et.load(distinct_map(PAIR), path=LoadPath.PROGRAM).raise_for_differences()
    et.load(
        shifted(PAIR, 3), path=LoadPath.PROGRAM, keep=True, method="second"
    ).raise_for_differences()


@pytest.mark.parametrize("path", list(LoadPath), ids=lambda p: p.label)
def test_keep_without_a_loaded_program_is_invalid_state(et, probe_program, path):
    needs(et, path)
    et.prepare(PAIR)
    report = et.send(Request.load(probe_program(PAIR), PAIR, OptionsMap(), path=path, keep=True))
    assert (report.outcome, report.detail) == (Outcome.RUNTIME_ERROR, RuntimeErrorCode.InvalidState)
    assert report.entries == ()


def test_every_module_path_refuses_a_method_the_program_lacks(et):
    needs(et, keep=True)
    for path in MODULE_PATHS:
        if path not in et.load_paths:
            continue
        et.load(distinct_map(PAIR), path=path).raise_for_differences()
        verdict = et.load(distinct_map(PAIR), path=path, keep=True, method="no_such_method")
        assert verdict.kinds() == (DifferenceKind.UNEXPECTED_OUTCOME,)
        assert verdict.report.outcome is Outcome.RUNTIME_ERROR
        assert "no_such_method" in verdict.report.message
