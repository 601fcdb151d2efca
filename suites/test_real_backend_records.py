"""The real backends' records (docs/agent.md, "Records for real backends"): every real
backend the agent announces in HELLO is recorded, and a real delegate's ``init`` is
checked exactly, like a probe's, on every load path, alone, beside probes and in
several models at once. The other real-backend suites check the same records in every
``et.load``, ``et.set`` and ``et.get`` they make."""

from __future__ import annotations

import pytest

from harness.check import LoadPath
from harness.options import OptionsMap
from harness.runner import ModelLoad, xnnpack_output

XNNPACK = "XnnpackBackend"


@pytest.mark.backend(XNNPACK)  # a device with a real backend (the MCU boards have none)
def test_every_real_backend_in_hello_is_recorded(et):
    real = [entry.name for entry in et.hello.entries if not entry.is_probe]
    assert real, "the agent announces no real backend"
    assert list(et.recorded) == real


def _xnnpack_entry(verdict):
    (outcome,) = [b for b in verdict.backends if b.name == XNNPACK]
    return outcome


@pytest.mark.backend(XNNPACK)
@pytest.mark.options_without_effect
def test_a_real_delegate_gets_exactly_its_own_specs_on_every_path(et, load_path):
    options = OptionsMap.from_dict(
        {
            "ProbeA": {"workspace_sharing_mode": 2, "a": "probe"},
            XNNPACK: {"workspace_sharing_mode": 1, "weight_cache_enabled": False, "s": "ü"},
        }
    )
    stored = OptionsMap() if load_path is LoadPath.MODULE_BOTH else None
    verdict = et.load(
        options, delegates=("ProbeA", XNNPACK), unobserved=(XNNPACK,), path=load_path, stored=stored
    )
    verdict.raise_for_differences()
    xnn, given = _xnnpack_entry(verdict), options.for_backend(XNNPACK)
    assert given is not None
    assert xnn.entry.is_recorded and xnn.expected_options == given.options
    assert (xnn.entry.calls, xnn.entry.executes, xnn.entry.backend_status) == (1, 1, 0)
    assert verdict.report.fact("outputs") == xnnpack_output()


@pytest.mark.backend(XNNPACK)
@pytest.mark.parametrize("concurrent", [False, True], ids=["in-order", "concurrent"])
def test_each_model_records_its_own_real_delegate(et, concurrent):
    if et.max_models < 3:
        pytest.skip("the device loads one model per LOAD")
    models = [
        ModelLoad(OptionsMap.from_dict({XNNPACK: {"workspace_sharing_mode": mode}}), (XNNPACK,))
        for mode in (0, 1, 2)
    ]
    verdicts = et.load_models(models, concurrent=concurrent, unobserved=(XNNPACK,))
    for index, verdict in enumerate(verdicts):
        verdict.raise_for_differences()
        xnn = _xnnpack_entry(verdict)
        assert xnn.entry.is_recorded and xnn.entry.model == index
