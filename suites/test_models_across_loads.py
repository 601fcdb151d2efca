"""Several models across LOADs: global state between loads, unload and reload orders,
and random sets of models (property-based), each model checked against its own map.

Global state is global, and init never reads it. The runtime's ``set_option(backend,
options)`` (runtime/backend/interface.h) looks the backend up and calls its own virtual
``set_option``; the runtime keeps nothing of it. A delegate's ``init`` reads
``BackendInitContext::runtime_specs()`` (runtime/backend/backend_init_context.h): a span
fixed when the context is built, from the load's map entry for the delegate's id, with
no setter and no fallback to any global store. So after a ``set_option`` every later
``init``, in any model, sequential or concurrent, sees its own load's entry and nothing
else (no entry: an empty span), and the values set stay the backend's (``get_option``
reads them back) whatever the loads carried. Which of a backend's global value and a
per-load spec wins is the backend's own decision, not the runtime's (it merges
nothing): XnnpackBackend lets the spec win for that delegate (suites/test_xnnpack.py);
the probes keep both apart, so here the check is exact on both sides.

Unload and reload: a LOAD without KEEP frees every model of the previous LOAD (their
Programs or Modules, each delegate destroyed) before it loads its own (wire-format.md,
LOAD), so a sequence of LOADs is how a case unloads and reloads: load A, load A and B,
keep only B (A unloaded), reload A with another map or none, ... Each LOAD is checked
against its own maps, and an EXECUTE after it runs exactly the models it loaded: an
option that stuck to a backend from an earlier load, or from an unloaded model, is a
difference.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.check import LoadPath, Outcome, Verdict
from harness.options import BackendOptions, Option, OptionsMap, options_maps
from harness.runner import CaseRunner, ModelLoad

from .test_models import CONCURRENCY, OTHER, PROBE, assert_all_exact, need_models, own_map

THIRD = "ProbeC"
BOTH = (PROBE, OTHER)


def load_exactly(et: CaseRunner, models: list[ModelLoad], concurrent: bool) -> None:
    """Load ``models`` in one LOAD; every model exact, a model without a map gets nothing,
    and an EXECUTE runs exactly these models' delegates once more."""
    verdicts = et.load_models(models, concurrent=concurrent)
    if len(models) > 1:
        assert_all_exact(verdicts, len(models))
    else:  # a single model is an ordinary LOAD, without the "models" fact
        verdicts[0].raise_for_differences()
    for model, verdict in zip(models, verdicts, strict=True):
        if not model.options.backends:
            assert all(e.options == () for e in verdict.report.entries), verdict.report.entries
    report = et.execute()
    assert report.outcome is Outcome.OK, report
    assert sorted((e.model, e.name) for e in report.entries) == sorted(
        {(k, d) for k, m in enumerate(models) for d in m.program_ids}
    )


# ---- a global set_option between two loads ------------------------------------------


def global_map() -> OptionsMap:
    """Global values: the per-load keys with values no model sends, and a key of its own."""
    return OptionsMap(
        tuple(
            BackendOptions(
                backend,
                (
                    Option("model", -1 - i),
                    Option("who", f"global {backend}"),
                    Option("global_only", True),
                ),
            )
            for i, backend in enumerate(BOTH)
        )
    )


@CONCURRENCY
def test_a_global_set_option_between_two_loads_reaches_no_later_init(et, load_path, concurrent):
    need_models(et, 3, concurrent)
    load_exactly(et, [ModelLoad(own_map(0, BOTH), BOTH, load_path)], concurrent)
    values = global_map()
    et.set(values).raise_for_differences()
    # The same keys per load (their values win), a model without a map (gets nothing),
    # and a model that maps one of two backends (the other gets nothing).
    later = [
        ModelLoad(own_map(1, BOTH), BOTH, load_path),
        ModelLoad(OptionsMap(), BOTH, load_path),
        ModelLoad(own_map(2, (OTHER,)), BOTH, load_path),
    ]
    load_exactly(et, later, concurrent)
    placeholders = OptionsMap(
        tuple(
            BackendOptions(b.backend_id, tuple(Option(o.key, 0) for o in b.options))
            for b in values.backends
        )
    )
    et.get(placeholders, expected=values).raise_for_differences()


@CONCURRENCY
def test_set_option_while_models_are_loaded_changes_no_model(et, load_path, concurrent):
    need_models(et, 2, concurrent)
    models = [
        ModelLoad(own_map(0, BOTH), BOTH, load_path),
        ModelLoad(own_map(1, (PROBE,)), (PROBE,), load_path),
    ]
    load_exactly(et, models, concurrent)
    et.set(global_map()).raise_for_differences()
    # A fresh LOAD of the same models: each init still sees its own map alone.
    load_exactly(et, models, concurrent)


# ---- unload and reload orders ---------------------------------------------------------

# A model is a letter with its delegates; a version of it a map of its own ("0": none).
DELEGATES = {"A": BOTH, "B": (OTHER,), "C": (PROBE, THIRD)}
ORDERS = {
    "unload-a-reload-a-with-another-map": ("A1", "A1 B1", "B1", "A2 B1"),
    "reload-without-a-map": ("A1 B1", "B1", "A0 B1", "A3"),
    "reverse-order-new-maps": ("A1 B1 C1", "C2 B2 A2", "A1"),
    "grow-and-shrink": ("C1", "A1 B1 C1", "C2", "A2 B2 C0", "B3"),
    "same-model-twice-then-once": ("A1 A2", "A2", "A1 A1"),
}


def version_map(model: str) -> OptionsMap:
    """``model`` (e.g. "A2") as a map: values only that letter's version has."""
    letter, version = model[0], int(model[1:])
    if version == 0:
        return OptionsMap()
    return OptionsMap(
        tuple(
            BackendOptions(
                backend,
                (
                    Option("model", ord(letter) * 100 + version * 10 + i),
                    Option("who", f"{backend} of {model}"),
                ),
            )
            for i, backend in enumerate(DELEGATES[letter])
        )
    )


@CONCURRENCY
@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
def test_unload_and_reload_orders(et, load_path, concurrent, order):
    need_models(et, max(len(step.split()) for step in order), concurrent)
    et.prepare([THIRD, *BOTH])
    for step in order:
        models = [ModelLoad(version_map(m), DELEGATES[m[0]], load_path) for m in step.split()]
        load_exactly(et, models, concurrent)


# ---- property-based: random models, maps, paths and orders -----------------------------

NAMES = (PROBE, OTHER, THIRD)  # 3 backends x 4 models: 12 entries, within a report's 16
MAX_RANDOM_MODELS = 4


@st.composite
def random_model(draw: st.DrawFn, paths: tuple[LoadPath, ...]) -> ModelLoad:
    delegates = tuple(draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4)))
    options = draw(options_maps(backend_ids=tuple(dict.fromkeys(delegates)), max_options=4))
    return ModelLoad(options, delegates, draw(st.sampled_from(paths)))


_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(data=st.data())
def test_random_models_in_random_orders_each_get_exactly_their_own(et, data):
    need_models(et, 2)
    et.prepare(NAMES)
    most = min(et.max_models, MAX_RANDOM_MODELS)
    loads = data.draw(
        st.lists(
            st.tuples(
                st.lists(random_model(et.load_paths), min_size=1, max_size=most),
                st.booleans() if et.concurrent else st.just(False),
            ),
            min_size=1,
            max_size=3,
        ),
        label="LOADs (models, concurrent)",
    )
    for models, concurrent in loads:
        verdicts: tuple[Verdict, ...] = et.load_models(models, concurrent=concurrent)
        for verdict in verdicts:
            verdict.raise_for_differences()
        for index, (model, verdict) in enumerate(zip(models, verdicts, strict=True)):
            got = sorted((e.model, e.name, e.calls) for e in verdict.report.entries)
            assert got == sorted(
                (index, b, model.program_ids.count(b)) for b in set(model.program_ids)
            ), verdict.report.entries
