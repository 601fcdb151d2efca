"""Timing one option-map case on a device for ``et-harness bench``: its map, the latency
figures of a sample, and a sampler for each way a case can go (session mode, pipelined,
the per-case way, the floor)."""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.codec import wire
from harness.data.messages import Action, Outcome, Report, Request
from harness.data.options import BackendOptions, Option, OptionsMap
from harness.devices.base import Device
from harness.devices.hosted import HostedDevice
from harness.errors import CheckFailure
from harness.runner import CaseRunner


class BenchmarkError(CheckFailure):
    """A benchmark case did not come back correct; figures would be meaningless."""


def enough_for(percentile: int, samples: int) -> bool:
    """Whether ``samples`` times give the ``percentile`` (90: p90): some sample must lie
    above it (p90 needs 11, p99 101), else it is only the slowest case."""
    return samples * (100 - percentile) > 100


def samples_for(percentile: int) -> int:
    """The fewest samples that give ``percentile`` (:func:`enough_for`)."""
    return 100 // (100 - percentile) + 1


@dataclass(frozen=True)
class Latency:
    """Per-case wall times of one way of running cases; a percentile is None where the
    sample is too small for it (:func:`enough_for`), p90 and p99 are None where there
    are no per-case times (``mean_only``: p50 is then the mean)."""

    cases: int
    total_s: float
    p50_ms: float
    p90_ms: float | None
    p99_ms: float | None
    mean_only: bool = False

    @property
    def per_second(self) -> float:
        return self.cases / self.total_s if self.total_s else 0.0

    @classmethod
    def of(cls, samples_s: Sequence[float], total_s: float | None = None) -> Latency:
        ordered = sorted(samples_s)

        def pick(percentile: int) -> float:
            return ordered[min(len(ordered) - 1, percentile * len(ordered) // 100)] * 1000

        def given(percentile: int) -> float | None:
            return pick(percentile) if enough_for(percentile, len(ordered)) else None

        total = total_s if total_s is not None else sum(ordered)
        return cls(len(ordered), total, pick(50), given(90), given(99))

    @classmethod
    def mean(cls, cases: int, total_s: float) -> Latency:
        """Cases timed only together (pipelined): their mean, no percentiles."""
        return cls(cases, total_s, total_s / cases * 1000, None, None, mean_only=True)


def case_map(backends: int, options: int, string_bytes: int) -> OptionsMap:
    """A map of ``backends`` probes with ``options`` options each, every type present."""

    def value(b: int, i: int) -> bool | int | str:
        kind = i % 3
        if kind == 0:
            return b * 1000 + i
        if kind == 1:
            return (b + i) % 2 == 0
        return (f"{b}.{i}:" + "v" * string_bytes)[:string_bytes]

    return OptionsMap(
        tuple(
            BackendOptions(
                f"Bench{b}", tuple(Option(f"key{i:02d}", value(b, i)) for i in range(options))
            )
            for b in range(backends)
        )
    )


def _timed(cases: int, one_case: Callable[[], None]) -> Latency:
    samples = []
    start = time.perf_counter()
    for _ in range(cases):
        begin = time.perf_counter()
        one_case()
        samples.append(time.perf_counter() - begin)
    return Latency.of(samples, time.perf_counter() - start)


def sample_alternately(
    rounds: int, first: Callable[[], float], second: Callable[[], float]
) -> tuple[Latency, Latency]:
    """Sample ``first`` and ``second`` (each returns the seconds it measured) in turn,
    so both see the same machine: on a shared machine the cost of waking another
    process swings by several times between minutes, which would skew their ratio."""
    first(), second()  # warm
    a, b = [], []
    for _ in range(rounds):
        a.append(first())
        b.append(second())
    return Latency.of(a), Latency.of(b)


def session_mode(runner: CaseRunner, options: OptionsMap, cases: int) -> Latency:
    """(a) one LOAD request per case over the running agent, verdict checked."""

    def one_case() -> None:
        verdict = runner.load(options)
        if not verdict.ok:
            raise BenchmarkError(verdict.render())

    one_case()  # warm: registration, program push
    return _timed(cases, one_case)


def case_request(device: Device, options: OptionsMap) -> Request:
    """The LOAD request of one case, with the device path of its probe program."""
    return Request.load(device.program_for(options.backend_ids), options.backend_ids, options)


def round_trip_sampler(
    device: Device, runner: CaseRunner, options: OptionsMap
) -> Callable[[], float]:
    """(a) the device's part of one case: from the request's first byte sent to the
    report's last byte received (the host encodes before, decodes and checks after)."""
    return request_sampler(runner, case_request(device, options))


def request_sampler(runner: CaseRunner, request: Request) -> Callable[[], float]:
    """The round trip of ``request`` on ``runner``'s agent, its report checked Ok."""
    session = runner.session

    def round_trip() -> float:
        seq = session.next_seq()
        frame = wire.encode_request(dataclasses.replace(request, seq=seq))
        begin = time.perf_counter()
        data = session.exchange(frame)
        elapsed = time.perf_counter() - begin
        _expect_ok([session.decode(data, seq)])
        return elapsed

    return round_trip


def session_pipelined(
    device: Device, runner: CaseRunner, options: OptionsMap, cases: int, window: int = 8
) -> Latency:
    """(a') the same cases with up to ``window`` requests in flight."""
    session = runner.session
    runner.load(options)
    request = case_request(device, options)
    start = time.perf_counter()
    reports = session.pipeline([request] * cases, window)
    total = time.perf_counter() - start
    _expect_ok(reports)
    return Latency.mean(cases, total)


def per_case_way(device: HostedDevice, options: OptionsMap, cases: int) -> Latency:
    """(b) push a request file, run the agent one-shot, pull the report file, per case."""
    requests = wire.encode_request(Request.register(options.backend_ids)) + wire.encode_request(
        case_request(device, options)
    )
    remote_in = posixpath.join(device.work_dir, "bench", "requests.bin")
    remote_out = posixpath.join(device.work_dir, "bench", "reports.bin")
    argv, env = device.agent_command("--oneshot", remote_in, remote_out)  # as sessions start it
    timeout = device.profile.timeouts.command
    with tempfile.TemporaryDirectory() as tmp:
        local_in, local_out = Path(tmp, "requests.bin"), Path(tmp, "reports.bin")
        local_in.write_bytes(requests)

        def one_case() -> None:
            device.transport.push(local_in, remote_in)
            result = device.transport.run(argv, timeout=timeout, env=env)
            if result.exit_code != 0:
                raise BenchmarkError(
                    f"one-shot agent exited {result.exit_code}: "
                    f"{result.stderr.decode(errors='replace')[-500:]}"
                )
            device.transport.pull(remote_out, local_out)
            _expect_ok(_split_reports(local_out.read_bytes()))

        return _timed(cases, one_case)


@contextlib.contextmanager
def echo_sampler(device: HostedDevice, size: int) -> Iterator[Callable[[], float]]:
    """(c) ``size`` bytes echoed by ``cat`` on the device over the same kind of stream."""
    stream = device.transport.open_stream(["cat"])
    payload = (bytes(range(256)) * (size // 256 + 1))[:size]
    timeout = device.profile.timeouts.case

    def echo() -> float:
        begin = time.perf_counter()
        stream.write(payload)
        echoed = stream.read_exact(size, timeout)
        elapsed = time.perf_counter() - begin
        if echoed != payload:
            raise BenchmarkError("the echo came back different")
        return elapsed

    try:
        yield echo
    finally:
        stream.close()


def unregistered_get_sampler(runner: CaseRunner, options: OptionsMap) -> Callable[[], float]:
    """(c) for devices without processes (MCU firmware), where nothing can echo: a GET of
    the same options for backends that are not registered. The agent answers NotFound
    for each and returns the options untouched, so about as many bytes travel each way
    as in a case, and no backend does any work."""
    ghosts = OptionsMap.unchecked(
        BackendOptions(f"Unregistered{b.backend_id}", b.options) for b in options.backends
    )
    session = runner.session

    def unregistered_get() -> float:
        begin = time.perf_counter()
        report = session.request(Request(Action.GET, ghosts))
        elapsed = time.perf_counter() - begin
        if report.outcome is not Outcome.OK or any(e.status != 0x20 for e in report.entries):
            raise BenchmarkError(f"the unregistered GET did not come back NotFound: {report}")
        return elapsed

    return unregistered_get


def runtime_time_us(runner: CaseRunner, options: OptionsMap, rounds: int = 20) -> int:
    """Median microseconds the runtime itself spent on one LOAD, as the agent measures
    it: ``Program::load`` (program_load_us), ``load_method`` with every backend's
    ``init`` (load_us) and ``execute`` (execute_us)."""
    totals = []
    for _ in range(rounds):
        report = runner.load(options).report
        totals.append(
            sum(int(report.fact(k) or 0) for k in ("program_load_us", "load_us", "execute_us"))
        )
    return sorted(totals)[len(totals) // 2]


def _split_reports(data: bytes) -> list[Report]:
    reports: list[Report] = []
    offset = 0
    while offset < len(data):
        header = wire.peek_header(data[offset : offset + wire.HEADER_SIZE])
        reports.append(wire.decode_report(data[offset : offset + header.length]))
        offset += header.length
    return reports


def _expect_ok(reports: Sequence[Report]) -> None:
    for report in reports:
        if report.outcome is not Outcome.OK or any(e.status for e in report.entries):
            raise BenchmarkError(f"a case failed: {report}")
        if report.action is Action.LOAD and not report.entries:
            raise BenchmarkError("a LOAD report named no backend")
