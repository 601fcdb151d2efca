"""Several models in one LOAD (wire-format.md, LOAD "models"): what a device announces.

A LOAD may carry up to 8 load specifications, each its own program instance with its
own map; a device says in HELLO how many it holds (``max_models``, 1 when absent) and
answers a LOAD carrying more, or asking for CONCURRENT loading it cannot do, with
UNSUPPORTED, leaving nothing half loaded. The hosted agent (host, ssh-emu, adb-emu)
announces 8 and loads them in order or, CONCURRENT, each on a thread of its own, all
started together. The MCU boards hold 8 too but have no threads: they announce
``concurrent`` false in HELLO, so the CONCURRENT cases skip there with that reason and
the others load their models one after another.

Every multi-model case checks each model against its own map (check_models): an option
a delegate of one model receives from another model's map is a CROSS_MODEL difference.
A report holds 16 entries, so K models of B probes each need K * B <= 16.
"""

from __future__ import annotations

import pytest

from harness.check import (
    MAX_MODELS,
    DifferenceKind,
    LoadPath,
    LoadSpec,
    Outcome,
    Request,
    Verdict,
)
from harness.options import BackendOptions, Option, OptionsMap
from harness.runner import ModelLoad

from .maps import single
from .serving import needs_a_load_path

PROBE = "ProbeA"
OTHER = "ProbeB"
# The delegates of model n: overlapping sets of the same two backends, in both orders.
DELEGATE_SETS = ((PROBE, OTHER), (OTHER, PROBE), (PROBE,))
CONCURRENCY = pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "concurrent"])


def need_models(et, count: int, concurrent: bool = False) -> None:
    """Skip where the device holds fewer than ``count`` models per LOAD or, with
    ``concurrent``, cannot load them on threads of their own, or serves no load path."""
    needs_a_load_path(et)
    if et.max_models < count:
        pytest.skip(
            f"the device holds {et.max_models} model(s) per LOAD (max_models in "
            f"HELLO); this case loads {count}"
        )
    if concurrent and not et.concurrent:
        pytest.skip(
            "the device loads the models of a LOAD one after another (HELLO "
            "concurrent false: no threads on the board)"
        )


def own_map(model: int, delegates: tuple[str, ...]) -> OptionsMap:
    """The same backend ids and keys in every model, with values only model ``model`` has."""
    return OptionsMap(
        tuple(
            BackendOptions(
                backend,
                (
                    Option("model", model * 100 + i),
                    Option("who", f"{backend} of model {model}"),
                    Option("even", model % 2 == 0),
                ),
            )
            for i, backend in enumerate(delegates)
        )
    )


def assert_all_exact(verdicts: tuple[Verdict, ...], count: int) -> None:
    assert len(verdicts) == count
    for verdict in verdicts:
        verdict.raise_for_differences()
    assert verdicts[0].report.fact("models") == count
    for index, verdict in enumerate(verdicts):
        assert verdict.report.entries, f"model {index} reported no entries"
        assert {e.model for e in verdict.report.entries} == {index}


def test_device_announces_how_many_models_a_load_may_carry(et):
    announced = et.hello.fact("max_models")
    assert announced is None or (isinstance(announced, int) and 1 <= announced <= MAX_MODELS)
    assert 1 <= et.max_models <= MAX_MODELS


@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "concurrent"])
def test_more_models_than_announced_is_unsupported_and_leaves_nothing_loaded(
    et, probe_program, load_path, concurrent
):
    if et.max_models >= MAX_MODELS:
        pytest.skip(f"the device holds {MAX_MODELS} models: the wire cannot carry more")
    program = probe_program((PROBE,))
    further = tuple(
        LoadSpec(
            program,
            (PROBE,),
            single(PROBE, Option("model", n)),
            load_path,
            method_options=single(PROBE, Option("model", n))
            if load_path is LoadPath.MODULE_BOTH
            else OptionsMap(),
        )
        for n in range(1, et.max_models + 1)
    )
    request = Request.load(
        program,
        (PROBE,),
        single(PROBE, Option("model", 0)),
        path=load_path,
        models=further,
        concurrent=concurrent,
    )
    report = et.send(request)
    assert report.outcome is Outcome.UNSUPPORTED, report
    assert report.entries == ()
    assert "max_models" in report.message
    # The device still serves a LOAD within its capacity, exactly.
    options = single(PROBE, Option("model", "alone"))
    stored = OptionsMap() if load_path is LoadPath.MODULE_BOTH else None
    et.load(options, delegates=(PROBE,), path=load_path, stored=stored).raise_for_differences()


def test_concurrent_loading_is_refused_by_a_device_without_threads(et, probe_program):
    if et.concurrent:
        pytest.skip("the device loads models concurrently")
    program = probe_program((PROBE,))
    report = et.send(Request.load(program, (PROBE,), OptionsMap(), concurrent=True))
    assert report.outcome is Outcome.UNSUPPORTED, report


@CONCURRENCY
@pytest.mark.parametrize("count", [2, 3, 8])
def test_each_model_gets_exactly_its_own_map(et, load_path, concurrent, count):
    need_models(et, count, concurrent)
    models = []
    for n in range(count):
        delegates = DELEGATE_SETS[n % len(DELEGATE_SETS)]
        models.append(ModelLoad(own_map(n, delegates), delegates, load_path))
    assert_all_exact(et.load_models(models, concurrent=concurrent), count)


@CONCURRENCY
@pytest.mark.parametrize("mapped_first", [True, False], ids=["mapped_first", "empty_first"])
def test_a_model_without_a_map_gets_nothing_beside_one_with_a_map(
    et, load_path, concurrent, mapped_first
):
    need_models(et, 2, concurrent)
    delegates = (PROBE, OTHER)
    mapped = ModelLoad(own_map(0, delegates), delegates, load_path)
    # On module_both the empty map is the explicit one; the stored decoys must not arrive.
    empty = ModelLoad(OptionsMap(), delegates, load_path)
    models = [mapped, empty] if mapped_first else [empty, mapped]
    verdicts = et.load_models(models, concurrent=concurrent)
    assert_all_exact(verdicts, 2)
    empty_index = 1 if mapped_first else 0
    entries = verdicts[empty_index].report.entries  # a model's verdict holds its own entries
    assert sorted(e.name for e in entries) == sorted(delegates)
    assert all(e.calls == 1 and e.options == () for e in entries), entries


@CONCURRENCY
def test_every_load_path_side_by_side(et, concurrent):
    paths = [p for p in LoadPath if p in et.load_paths]
    need_models(et, max(2, len(paths)), concurrent)
    if len(paths) < 2:
        pytest.skip(f"the device serves one load path ({paths[0].label})")
    models = [
        ModelLoad(own_map(n, (PROBE, OTHER)), (PROBE, OTHER), path) for n, path in enumerate(paths)
    ]
    assert_all_exact(et.load_models(models, concurrent=concurrent), len(paths))


@CONCURRENCY
def test_two_delegates_of_one_backend_in_each_model_are_two_handles(et, load_path, concurrent):
    need_models(et, 2, concurrent)
    shapes = ((PROBE, PROBE, OTHER), (OTHER, PROBE, OTHER))
    models = [
        ModelLoad(own_map(n, tuple(dict.fromkeys(d))), d, load_path) for n, d in enumerate(shapes)
    ]
    verdicts = et.load_models(models, concurrent=concurrent)
    assert_all_exact(verdicts, 2)
    for verdict, delegates in zip(verdicts, shapes, strict=True):
        calls = {e.name: (e.calls, e.executes) for e in verdict.report.entries}
        assert calls == {b: (delegates.count(b), delegates.count(b)) for b in delegates}


def test_execute_after_a_multi_model_load_runs_every_model_once_more(et, load_path):
    need_models(et, 3)
    models = [
        ModelLoad(own_map(n, DELEGATE_SETS[n]), DELEGATE_SETS[n], load_path) for n in range(3)
    ]
    assert_all_exact(et.load_models(models, concurrent=et.concurrent), 3)
    report = et.execute()
    assert report.outcome is Outcome.OK, report
    executed = sorted((e.model, e.name, e.executes) for e in report.entries)
    assert executed == sorted((n, backend, 1) for n in range(3) for backend in DELEGATE_SETS[n])


def test_a_failing_model_is_reported_as_its_own_and_the_others_still_load(et, load_path):
    need_models(et, 2)
    missing = "EtbNeverRegistered"
    assert missing not in et.registered
    good = ModelLoad(own_map(0, (PROBE,)), (PROBE,), load_path)
    bad = ModelLoad(own_map(1, (missing,)), (missing,), load_path)
    verdicts = et.load_models([good, bad], concurrent=et.concurrent, unobserved=(missing,))
    assert [v.kinds() for v in verdicts] == [(DifferenceKind.UNEXPECTED_OUTCOME,)] * 2
    report = verdicts[0].report  # model 0's entries; outcome and message are the LOAD's
    assert report.outcome is Outcome.RUNTIME_ERROR, report
    assert report.message.startswith("model 1: "), report.message
    assert f'delegate "{missing}" has no registered backend' in report.message
    [entry] = report.entries
    assert (entry.name, entry.model, entry.calls, entry.executes) == (PROBE, 0, 1, 1)
    assert entry.options == own_map(0, (PROBE,)).backends[0].options
    assert verdicts[1].report.entries == ()
