"""What the agent's records of the real backends' calls cost per case (``et-harness bench``):
each case timed on an agent with records and on one without, in turn."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.cli.bench_timing import Latency, request_sampler, sample_alternately
from harness.data.messages import Action, LoadSpec, Request
from harness.data.options import OptionsMap
from harness.devices.base import Device
from harness.devices.hosted import HostedDevice
from harness.programs.xnnpack import XNNPACK_BACKEND
from harness.runner import CaseRunner

RECORDS_GOAL = 1.05
"""What the real backends' records may cost: round trip with them over without, per case."""


@dataclass(frozen=True)
class RecordsCost:
    """One case's round trip on an agent with records (``on``) and without (``off``)."""

    case: str
    on: Latency
    off: Latency

    @property
    def ratio(self) -> float:
        return self.on.p50_ms / self.off.p50_ms if self.off.p50_ms else 0.0


def records_cases(device: Device) -> dict[str, Request]:
    """The cases the records could slow: real XNNPACK delegates (beside two probes, and
    in two models loaded concurrently), XNNPACK's set_option and get_option."""
    probes = ("Bench0", "Bench1")
    delegates = (*probes, XNNPACK_BACKEND)
    xnnpack = OptionsMap.from_dict(
        {
            "Bench0": {"a": 1, "b": "x"},
            "Bench1": {"c": True},
            XNNPACK_BACKEND: {"workspace_sharing_mode": 1, "weight_cache_enabled": False},
        }
    )
    program = device.program_for(delegates)
    load = Request.load(program, delegates, xnnpack)
    other = LoadSpec(program, delegates, xnnpack)
    global_options = OptionsMap.from_dict(
        {XNNPACK_BACKEND: {"workspace_sharing_mode": 2, "weight_cache_enabled": False}}
    )
    return {
        "xnnpack load": load,
        "xnnpack 2 models concurrent": dataclasses.replace(load, models=(other,), concurrent=True),
        "xnnpack set": Request(Action.SET, global_options),
        "xnnpack get": Request(Action.GET, global_options),
    }


def records_cost(device: HostedDevice, rounds: int) -> tuple[RecordsCost, ...]:
    """Each of :func:`records_cases` on two fresh agents of ``device``, one recording the
    real backends' calls and one started with ``--no-records``, sampled in turn."""
    recorded = CaseRunner(lambda: device.start_session(records=True), device.program_for)
    unrecorded = CaseRunner(lambda: device.start_session(records=False), device.program_for)
    try:
        costs = []
        for name, request in records_cases(device).items():
            for each in (recorded, unrecorded):
                each.prepare(["Bench0", "Bench1"])
            on, off = sample_alternately(
                rounds, request_sampler(recorded, request), request_sampler(unrecorded, request)
            )
            costs.append(RecordsCost(name, on, off))
        return tuple(costs)
    finally:
        recorded.close()
        unrecorded.close()
