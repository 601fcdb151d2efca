"""A real backend: OpenvinoBackend from the executorch wheel (x86_64 and aarch64).

``libexecutorch_backend_openvino.so`` registers ``OpenvinoBackend``; the OpenVINO
runtime (``libopenvino_c.so``) is only opened when the backend is asked whether it is
available, i.e. at load. OpenvinoBackend documents no runtime options and keeps
``BackendInterface``'s default ``set_option``/``get_option``: Ok, nothing stored,
values left as they are. Observed in 1.5.1 exactly so, for every type: the harness's
contract for OpenvinoBackend (``CONTRACTS``, harness/check/option_contracts.py) says it
reads no options on any route, which this suite pins. Without the
OpenVINO runtime on the device, a program delegating to it fails to load with NotFound
("Backend OpenvinoBackend is not available"), and the delegates before it still got
their own options.
"""

from __future__ import annotations

import pytest

from harness.check import CONTRACTS, Outcome, Request, RuntimeErrorCode
from harness.options import Option, OptionsMap

from .maps import single

pytestmark = pytest.mark.backend("OpenvinoBackend")

OPENVINO = "OpenvinoBackend"
CONTRACT = CONTRACTS[OPENVINO]
assert CONTRACT.options == () and CONTRACT.load is None and CONTRACT.set is None
VALUES = {"int": 4, "bool": True, "string": "CPU"}


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
@pytest.mark.options_without_effect
def test_set_of_any_key_is_ok_and_stores_nothing(et, value):
    et.set(single(OPENVINO, Option("device", value))).raise_for_differences()
    untouched = single(OPENVINO, Option("device", "placeholder"))
    et.get(untouched, expected=untouched).raise_for_differences()


@pytest.mark.options_without_effect
def test_get_before_any_set_is_ok_and_leaves_every_value(et):
    et.restart()
    untouched = single(
        OPENVINO, Option("device", "x"), Option("num_threads", -1), Option("cache", False)
    )
    et.get(untouched, expected=untouched).raise_for_differences()


def test_empty_calls_are_ok(et):
    et.set(single(OPENVINO)).raise_for_differences()
    et.get(single(OPENVINO), expected=single(OPENVINO)).raise_for_differences()


def test_load_without_the_openvino_runtime_gives_not_found(et, probe_program):
    options = OptionsMap.from_dict({"ProbeA": {"k": 1}, OPENVINO: {"device": "CPU"}})
    et.prepare(["ProbeA"])
    delegates = ("ProbeA", OPENVINO)
    report = et.send(Request.load(probe_program(delegates), delegates, options))
    assert (report.outcome, report.detail) == (Outcome.RUNTIME_ERROR, RuntimeErrorCode.NotFound)
    entry = report.entry(OPENVINO)
    assert entry is not None and entry.status == RuntimeErrorCode.NotFound and not entry.is_probe
    probe = report.entry("ProbeA")
    assert probe is not None and probe.options == (Option("k", 1),)
