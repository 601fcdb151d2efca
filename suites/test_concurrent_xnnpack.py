"""The real XNNPACK program in several models at once, loaded concurrently.

Each model is its own instance of the XNNPACK program (a probe delegate, then
XnnpackBackend), with per-load XNNPACK settings of its own (``workspace_sharing_mode``
0..2, ``weight_cache_enabled`` on and off), all loaded on threads started together and
executed. The probe of each model must get exactly its own options (check_models), every
XNNPACK ``init`` must succeed and every model must compute the program's output. This is
the case the race detectors (devices/host-tsan.yaml, host-helgrind.yaml, host-drd.yaml,
ci/run-race-detectors.sh) exist for: concurrent XNNPACK ``init`` is where upstream's races
were (docs/agent.md, "Race detectors").
"""

from __future__ import annotations

import pytest

from harness.check import LoadPath
from harness.options import BackendOptions, Option, OptionsMap
from harness.runner import ModelLoad, xnnpack_output

pytestmark = pytest.mark.backend("XnnpackBackend")

XNNPACK = "XnnpackBackend"
PROBE = "ProbeA"


def xnnpack_model(model: int, path: LoadPath) -> ModelLoad:
    """Model ``model``: its probe option and XNNPACK settings no neighbour shares."""
    options = OptionsMap((
        BackendOptions(PROBE, (Option("model", model),)),
        BackendOptions(XNNPACK, (Option("workspace_sharing_mode", model % 3),
                                 Option("weight_cache_enabled", model % 2 == 0))),
    ))  # fmt: skip
    stored = OptionsMap() if path is LoadPath.MODULE_BOTH else None
    return ModelLoad(options, delegates=(PROBE, XNNPACK), path=path, stored=stored)


@pytest.mark.parametrize("count", [2, 4])
def test_concurrent_xnnpack_models_each_init_and_compute(et, load_path, count):
    if et.max_models < count:
        pytest.skip(f"the device holds {et.max_models} model(s) per LOAD; this case loads {count}")
    models = [xnnpack_model(model, load_path) for model in range(count)]
    verdicts = et.load_models(models, concurrent=True, unobserved=(XNNPACK,))
    assert len(verdicts) == count
    for model, verdict in enumerate(verdicts):
        verdict.raise_for_differences()
        statuses = [e.status for e in verdict.report.entries if e.name == XNNPACK]
        assert statuses == [0], f"model {model}: XnnpackBackend init statuses {statuses}"
        assert verdict.report.fact("outputs") == xnnpack_output()
