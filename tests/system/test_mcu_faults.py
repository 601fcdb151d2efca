"""The framed serial link under faults: damaged bytes, a frozen device, a vanished device.

Real QEMU behind :class:`~harness.emulators.fault_relay.FaultRelay`, which
corrupts, drops and duplicates bytes in both directions with a seeded RNG.
Every case must end with the correct report for that case or with a transport
error; never a wrong report, never a report for another case, never a hang.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from harness.channel.serial.connect import connect
from harness.channel.serial.link_config import LinkConfig
from harness.data.messages import ENTRY_FLAG_PROBE, Action, Outcome, Report, Request
from harness.data.options import Option, OptionsMap
from harness.devices.firmware import firmware_session
from harness.emulators.fault_relay import FaultRates, FaultRelay
from harness.emulators.mcu import McuEmulator
from harness.session.agent_session import AgentSession
from harness.session.program_upload import ProgramUploadingSession
from harness.transport.base import (
    DeviceUnavailable,
    TransportError,
    TransportLost,
    TransportTimeout,
)
from harness.transport.serial import SerialSettings

PROBES = tuple(f"P{i}" for i in range(8))
CASES = 100  # per board: some 200 damaged frames, 600 resent, 45 duplicated (link stats)
SEED = 20240611
ONE_IN_A_THOUSAND = FaultRates(corrupt=0.001, drop=0.0005, duplicate=0.0005)
QUICK = LinkConfig(hello_timeout=1.0, ack_timeout=0.2, max_retries=4, request_timeout=4.0)


@dataclass(frozen=True)
class Case:
    """One request and the report it must get."""

    request: Request
    check: Callable[[Report], bool]


def _load_case(number: int, rng: random.Random) -> Case:
    count = rng.randint(1, len(PROBES))
    names = tuple(rng.sample(PROBES, count))
    options = OptionsMap.from_dict(
        {n: [("case", number), ("backend", n), ("fill", "z" * rng.randint(0, 80))] for n in names}
    )

    def sent_to(name: str) -> tuple[Option, ...]:
        backend = options.for_backend(name)
        assert backend is not None  # check() asks only for the names it was sent
        return backend.options

    def check(report: Report) -> bool:
        return (
            report.outcome == Outcome.OK
            and [e.name for e in report.entries] == list(names)
            and all(e.options == sent_to(e.name) for e in report.entries)
            and all(
                (e.calls, e.executes, e.flags) == (1, 1, ENTRY_FLAG_PROBE) for e in report.entries
            )
        )

    return Case(Request.load("", names, options), check)


def _set_case(number: int, rng: random.Random) -> Case:
    names = tuple(rng.sample(PROBES, rng.randint(1, 4)))
    options = OptionsMap.from_dict(
        {n: {"last_case": number, "tag": f"{n}-{number}"} for n in names}
    )

    def check(report: Report) -> bool:
        return report.outcome == Outcome.OK and [(e.name, e.options) for e in report.entries] == [
            (n, (Option("last_case", number), Option("tag", f"{n}-{number}"))) for n in names
        ]

    return Case(Request(Action.SET, options), check)


def _get_case(number: int, expected: dict[str, int]) -> Case:
    wanted = OptionsMap.from_dict({n: {"last_case": -1} for n in PROBES})

    def check(report: Report) -> bool:
        return report.outcome == Outcome.OK and [(e.name, e.options) for e in report.entries] == [
            (n, (Option("last_case", expected.get(n, -1)),)) for n in PROBES
        ]

    return Case(Request(Action.GET, wanted), check)


@pytest.mark.slow
def test_cases_through_a_faulty_link_end_correct_or_with_a_transport_error(
    mcu: McuEmulator, record_property
) -> None:
    rng = random.Random(SEED)
    with FaultRelay(
        ("127.0.0.1", mcu.port), to_device=ONE_IN_A_THOUSAND, to_host=ONE_IN_A_THOUSAND, seed=SEED
    ) as relay:
        link = connect(SerialSettings(url=relay.url), on_open=mcu.run)
        agent = firmware_session(link)
        sent = correct = 0
        errors: list[str] = []
        wrong: list[str] = []
        last_set: dict[str, int] = {}
        start = time.monotonic()
        try:
            assert agent.request(Request.register(PROBES)).outcome == Outcome.OK
            sent += 1
            for number in range(CASES):
                kind = number % 4
                if kind in (0, 1):
                    case = _load_case(number, rng)
                elif kind == 2:
                    case = _set_case(number, rng)
                else:
                    case = _get_case(number, dict(last_set))
                sent += 1
                try:
                    report = agent.request(case.request)
                except TransportError as exc:
                    errors.append(f"case {number}: {exc}")
                    continue
                if case.check(report):
                    correct += 1
                    if kind == 2:
                        last_set.update(
                            {b.backend_id: number for b in case.request.options.backends}
                        )
                else:
                    wrong.append(f"case {number}: {case.request} -> {report}")
            elapsed = time.monotonic() - start
            hello = agent.request(Request(Action.HELLO))
            sent += 1
            assert mcu.shutdown(link, 0) == 0  # the EXIT frame is resent if damaged
        finally:
            link.close()
        faults = relay.stats()
    record_property("mcu_fault_cases_per_second", CASES / elapsed)
    record_property("mcu_fault_link_stats", repr(link.stats()))
    assert not wrong, wrong[:3]
    assert len(errors) <= CASES // 50, errors[:3]  # a clear error is allowed, but must stay rare
    assert correct + len(errors) == CASES
    for direction in faults.values():  # the relay really damaged both directions
        assert direction.corrupted > 0 and direction.dropped > 0 and direction.duplicated > 0
    stats = link.stats()
    assert stats.bad_frames > 0 and stats.max_in_flight <= link.hello.window
    if isinstance(agent, ProgramUploadingSession):  # the uploads before LOADs are requests too
        sent += agent.upload_messages
    handled = hello.fact("requests_handled")
    assert isinstance(handled, int)
    # Resent frames and requests are answered from the device's cache: nothing ran twice.
    assert sent - len(errors) <= handled <= sent
    assert hello.fact("rx_overruns") == 0


def test_a_silent_device_gives_device_unavailable_within_the_timeout(mcu: McuEmulator) -> None:
    silent = FaultRates(drop=1.0)
    with FaultRelay(
        ("127.0.0.1", mcu.port), to_device=FaultRates(), to_host=silent, seed=1
    ) as relay:
        start = time.monotonic()
        with pytest.raises(DeviceUnavailable, match="no HELLO"):
            connect(SerialSettings(url=relay.url, hello_timeout=1.0), on_open=mcu.run)
        assert time.monotonic() - start < 3.0


def test_a_frozen_device_times_out_and_the_link_recovers_when_it_runs_again(
    mcu: McuEmulator,
) -> None:
    link = mcu.connect(QUICK)
    agent = AgentSession(link)
    try:
        assert agent.request(Request.register(("Alive",))).outcome == Outcome.OK
        os.kill(mcu.pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            with pytest.raises(TransportTimeout):
                agent.request(Request(Action.HELLO))
            assert time.monotonic() - start < QUICK.request_timeout + QUICK.hello_timeout + 1.0
        finally:
            os.kill(mcu.pid, signal.SIGCONT)
        report = agent.request(Request(Action.HELLO))
        assert report.outcome == Outcome.OK and [e.name for e in report.entries] == ["Alive"]
        assert mcu.shutdown(link, 0) == 0
    finally:
        link.close()


def test_a_vanished_device_is_transport_lost(mcu: McuEmulator) -> None:
    link = mcu.connect(QUICK)
    agent = AgentSession(link)
    try:
        assert agent.request(Request(Action.HELLO)).outcome == Outcome.OK
        mcu.stop()
        with pytest.raises(TransportLost):
            agent.request(Request(Action.HELLO))
        with pytest.raises(TransportLost, match="closed"):
            agent.request(Request(Action.HELLO))
    finally:
        link.close()
