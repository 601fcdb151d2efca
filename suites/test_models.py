"""Several models in one LOAD (wire-format.md, LOAD "models"): what a device announces.

A LOAD may carry up to 8 load specifications, each its own program instance with its
own map; a device says in HELLO how many it holds (``max_models``, 1 when absent) and
answers a LOAD carrying more, or asking for CONCURRENT loading it cannot do, with
UNSUPPORTED, leaving nothing half loaded. Today every agent here announces 1 (the
hosted agent loads one program instance per LOAD; the MCU holds one program).
"""

from __future__ import annotations

import pytest
from maps import single

from harness.messages import MAX_MODELS, LoadPath, LoadSpec, Outcome, Request
from harness.options import Option, OptionsMap

PROBE = "ProbeA"


def test_device_announces_how_many_models_a_load_may_carry(et):
    announced = et.hello.fact("max_models")
    assert announced is None or (isinstance(announced, int) and 1 <= announced <= MAX_MODELS)
    assert 1 <= et.max_models <= MAX_MODELS


@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "concurrent"])
def test_more_models_than_announced_is_unsupported_and_leaves_nothing_loaded(
        et, probe_program, load_path, concurrent):
    if et.max_models >= MAX_MODELS:
        pytest.skip(f"the device holds {MAX_MODELS} models: the wire cannot carry more")
    program = probe_program((PROBE,))
    further = tuple(
        LoadSpec(program, (PROBE,), single(PROBE, Option("model", n)), load_path,
                 method_options=single(PROBE, Option("model", n))
                 if load_path is LoadPath.MODULE_BOTH else OptionsMap())
        for n in range(1, et.max_models + 1)
    )
    request = Request.load(program, (PROBE,), single(PROBE, Option("model", 0)), path=load_path,
                           models=further, concurrent=concurrent)
    report = et.send(request)
    assert report.outcome is Outcome.UNSUPPORTED, report
    assert report.entries == ()
    assert "max_models" in report.message
    # The device still serves a LOAD within its capacity, exactly.
    options = single(PROBE, Option("model", "alone"))
    stored = OptionsMap() if load_path is LoadPath.MODULE_BOTH else None
    et.load(options, delegates=(PROBE,), path=load_path, stored=stored).raise_for_differences()


def test_concurrent_loading_is_refused_by_a_device_that_holds_one_model(et, probe_program):
    if et.max_models != 1:
        pytest.skip("the device holds several models")
    program = probe_program((PROBE,))
    report = et.send(Request.load(program, (PROBE,), OptionsMap(), concurrent=True))
    assert report.outcome is Outcome.UNSUPPORTED, report
