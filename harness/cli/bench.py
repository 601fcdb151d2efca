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

import dataclasses
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from harness import shipped
from harness.cli.bench_records import RECORDS_GOAL, RecordsCost, records_cost
from harness.cli.bench_timing import (
    BenchmarkError,
    Latency,
    case_map,
    case_request,
    echo_sampler,
    enough_for,
    per_case_way,
    round_trip_sampler,
    runtime_time_us,
    sample_alternately,
    samples_for,
    session_mode,
    session_pipelined,
    unregistered_get_sampler,
)
from harness.codec import wire
from harness.data.messages import Action, Request
from harness.devices.base import Device
from harness.devices.hosted import HostedDevice
from harness.runner import CaseRunner


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
        size = len(wire.encode_request(case_request(device, options)))
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
