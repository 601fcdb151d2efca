"""What one option-map case costs on a device, three ways (``et-harness bench``).

(a) session mode: the agent keeps running and serves case after case over one
    stream (one request, one report per case), also pipelined;
(b) the per-case way: push the request file, run the agent one-shot, pull the
    report file (how ExecuTorch's own on-device test scripts work);
(c) the floor: an empty round trip of the same size over the same transport, plus
    the runtime's own load and execute time as the agent measures it.

Figures are printed and written as JSON; docs/performance.md says how to read them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import shipped
from harness.codec import wire
from harness.data.messages import Action, LoadSpec, Outcome, Report, Request
from harness.data.options import BackendOptions, Option, OptionsMap
from harness.devices.base import Device
from harness.devices.hosted import HostedDevice
from harness.errors import CheckFailure
from harness.programs.xnnpack import XNNPACK_BACKEND
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


def _case_request(device: Device, options: OptionsMap) -> Request:
    """The LOAD request of one case, with the device path of its probe program."""
    return Request.load(device.program_for(options.backend_ids), options.backend_ids, options)


def round_trip_sampler(
    device: Device, runner: CaseRunner, options: OptionsMap
) -> Callable[[], float]:
    """(a) the device's part of one case: from the request's first byte sent to the
    report's last byte received (the host encodes before, decodes and checks after)."""
    return request_sampler(runner, _case_request(device, options))


def request_sampler(runner: CaseRunner, request: Request) -> Callable[[], float]:
    """The round trip of ``request`` on ``runner``'s agent, its report checked Ok."""
    link = runner.link

    def round_trip() -> float:
        seq = link.next_seq()
        frame = wire.encode_request(dataclasses.replace(request, seq=seq))
        begin = time.perf_counter()
        data = link.exchange(frame)
        elapsed = time.perf_counter() - begin
        _expect_ok([link.decode(data, seq)])
        return elapsed

    return round_trip


def session_pipelined(
    device: Device, runner: CaseRunner, options: OptionsMap, cases: int, window: int = 8
) -> Latency:
    """(a') the same cases with up to ``window`` requests in flight."""
    link = runner.link
    runner.load(options)
    request = _case_request(device, options)
    start = time.perf_counter()
    reports = link.pipeline([request] * cases, window)
    total = time.perf_counter() - start
    _expect_ok(reports)
    return Latency.mean(cases, total)


def per_case_way(device: HostedDevice, options: OptionsMap, cases: int) -> Latency:
    """(b) push a request file, run the agent one-shot, pull the report file, per case."""
    requests = wire.encode_request(Request.register(options.backend_ids)) + wire.encode_request(
        _case_request(device, options)
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
    link = runner.link

    def unregistered_get() -> float:
        begin = time.perf_counter()
        report = link.request(Request(Action.GET, ghosts))
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
    recorded = CaseRunner(lambda: device.start_link(records=True), device.program_for)
    unrecorded = CaseRunner(lambda: device.start_link(records=False), device.program_for)
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


@dataclass(frozen=True)
class DeviceFigures:
    """Everything measured on one device."""

    device: str
    cases: int
    session: Latency
    round_trip: Latency
    pipelined: Latency | None
    per_case: Latency | None
    floor: Latency | None
    runtime_us: int
    growth: tuple[dict, ...]
    records: tuple[RecordsCost, ...] = ()

    @property
    def throughput_ratio(self) -> float | None:
        """a/b: how many times more cases per second session mode runs."""
        if self.per_case is None:
            return None
        return self.session.per_second / self.per_case.per_second

    @property
    def floor_ms(self) -> float | None:
        """(c): the median empty round trip plus the runtime's own time per case."""
        if self.floor is None:
            return None
        return self.floor.p50_ms + self.runtime_us / 1000

    @property
    def floor_ratio(self) -> float | None:
        """a/c: session-mode median round trip over the floor."""
        floor_ms = self.floor_ms
        return None if floor_ms is None else self.round_trip.p50_ms / floor_ms

    @property
    def whole_case_floor_ratio(self) -> float | None:
        """Session-mode median whole case (with the host's encode, decode and check)
        over the floor."""
        floor_ms = self.floor_ms
        return None if floor_ms is None else self.session.p50_ms / floor_ms

    def as_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["throughput_ratio"] = self.throughput_ratio
        data["floor_ms"] = self.floor_ms
        data["floor_ratio"] = self.floor_ratio
        data["whole_case_floor_ratio"] = self.whole_case_floor_ratio
        for key in ("session", "round_trip", "pipelined", "per_case", "floor"):
            figures = getattr(self, key)
            if figures is not None:
                data[key]["per_second"] = figures.per_second
        for row, cost in zip(data["records"], self.records, strict=True):
            row["ratio"] = cost.ratio
        return data


GROWTH_SHAPES = (
    (1, 1, 8),
    (2, 8, 8),
    (4, 8, 8),
    (8, 8, 8),
    (1, 16, 8),
    (1, 32, 8),
    (1, 64, 8),
    (1, 8, 64),
    (1, 8, 255),
    (8, 64, 255),
)


def benchmark(
    device: Device, runner: CaseRunner, cases: int, per_case_cases: int, growth_cases: int
) -> DeviceFigures:
    """Measure (a), (b), (c) and how cost grows with the map, on one device."""
    options = case_map(backends=4, options=8, string_bytes=16)
    runner.prepare([f"Bench{b}" for b in range(8)])
    session = session_mode(runner, options, cases)
    hosted = device if isinstance(device, HostedDevice) else None  # files and processes
    round_trip_of_case = round_trip_sampler(device, runner, options)
    if hosted is not None:
        size = len(wire.encode_request(_case_request(device, options)))
        with echo_sampler(hosted, size) as echo:
            round_trip, floor = sample_alternately(cases, round_trip_of_case, echo)
    else:
        round_trip, floor = sample_alternately(
            cases, round_trip_of_case, unregistered_get_sampler(runner, options)
        )
    pipelined = session_pipelined(device, runner, options, cases) if hosted else None
    per_case = per_case_way(hosted, options, per_case_cases) if hosted else None
    runtime_us = runtime_time_us(runner, options)
    max_message = runner.hello.fact("max_message")
    growth = []
    for backends, count, string_bytes in GROWTH_SHAPES:
        shape = case_map(backends, count, string_bytes)
        request_bytes = len(wire.encode_request(Request(Action.LOAD, shape)))
        row: dict[str, int | float | str] = {
            "backends": backends,
            "options": count,
            "string_bytes": string_bytes,
            "request_bytes": request_bytes,
        }
        if isinstance(max_message, int) and request_bytes > max_message:
            row["skipped"] = f"request exceeds the device's max_message ({max_message} bytes)"
        elif count > runner.options_per_backend or backends * count > runner.options_per_request:
            row["skipped"] = (
                f"more options than the device holds (options_per_backend "
                f"{runner.options_per_backend})"
            )
        else:
            figures = session_mode(runner, shape, growth_cases)
            row.update(p50_ms=figures.p50_ms, per_second=figures.per_second)
        growth.append(row)
    records = records_cost(hosted, cases) if hosted else ()
    return DeviceFigures(
        device.name,
        cases,
        session,
        round_trip,
        pipelined,
        per_case,
        floor,
        runtime_us,
        tuple(growth),
        records,
    )


def run_scaling(devices: Sequence[str]) -> list[dict]:
    """Wall time of the whole suite run over the first 1..N ``devices``, one xdist worker
    per device, each run a fresh pytest process (emulators started inside)."""
    rows = []
    for count in range(1, len(devices) + 1):
        chosen = ",".join(devices[:count])
        argv = [
            sys.executable,
            "-m",
            "pytest",
            str(shipped.suites_dir()),
            "-q",
            "-p",
            "no:cacheprovider",
            "--device",
            chosen,
            "-n",
            str(count),
        ]
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise BenchmarkError(f"suite run on {chosen} failed:\n{done.stdout[-2000:]}")
        rows.append({"devices": chosen, "workers": count, "wall_s": round(wall, 2)})
    return rows


def format_figures(figures: DeviceFigures) -> str:
    """A few lines of text for the terminal."""

    def line(name: str, lat: Latency | None) -> str:
        if lat is None:
            return f"  {name:<22} {'n/a':>9}"
        head = f"  {name:<22} {lat.per_second:9.1f} cases/s"
        if lat.mean_only:
            return f"{head}   mean {lat.p50_ms:7.3f} ms   (timed together: no percentiles)"
        tail = "".join(
            f"   {label} {value:8.3f} ms" if value is not None else f"   {label} n too small"
            for label, value in (("p90", lat.p90_ms), ("p99", lat.p99_ms))
        )
        short = next((p for p in (90, 99) if not enough_for(p, lat.cases)), None)
        why = f"   ({lat.cases} cases; p{short} needs {samples_for(short)})" if short else ""
        return f"{head}   p50 {lat.p50_ms:8.3f} ms{tail}{why}"

    ratio = lambda r: "n/a" if r is None else f"{r:.1f}x"  # noqa: E731
    lines = [
        f"{figures.device}: {figures.cases} cases (4 backends x 8 options)",
        line("(a) session, whole case", figures.session),
        line("(a) session, round trip", figures.round_trip),
        line("(a) session, pipelined", figures.pipelined),
        line("(b) per-case way", figures.per_case),
        line("(c) floor: echo" if figures.per_case else "(c) floor: no-op GET", figures.floor),
        f"  inside the runtime per case, as the agent measures it (load and execute): "
        f"{figures.runtime_us} us",
        f"  a/b throughput {ratio(figures.throughput_ratio)}   "
        f"a/c round trip {ratio(figures.floor_ratio)} of the floor "
        f"(whole case {ratio(figures.whole_case_floor_ratio)})",
        "  growth (session p50 ms): "
        + ", ".join(
            f"{g['backends']}x{g['options']}x{g['string_bytes']}B="
            + (f"{g['p50_ms']:.2f}" if "p50_ms" in g else "n/a")
            for g in figures.growth
        ),
    ]
    for cost in figures.records:
        verdict = "ok" if cost.ratio <= RECORDS_GOAL else f"over the {RECORDS_GOAL}x goal"
        lines.append(
            f"  records, {cost.case}: p50 {cost.on.p50_ms:.3f} ms with, "
            f"{cost.off.p50_ms:.3f} ms without = {cost.ratio:.3f}x ({verdict})"
        )
    return "\n".join(lines)
