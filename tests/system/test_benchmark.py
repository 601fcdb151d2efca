"""The benchmark command runs end to end and writes its figures (no timing asserted)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from prerequisites import require

from harness.cli import main
from harness.cli.bench import (
    DeviceFigures,
    Latency,
    case_map,
    format_figures,
    sample_alternately,
)
from harness.data.options import OptionType


def test_case_map_has_every_type_and_the_requested_shape() -> None:
    options = case_map(backends=3, options=6, string_bytes=255)
    assert len(options.backends) == 3
    assert all(len(b.options) == 6 for b in options.backends)
    assert {o.type for b in options.backends for o in b.options} == set(OptionType)
    strings = [o.value for b in options.backends for o in b.options if o.type is OptionType.STRING]
    assert all(isinstance(s, str) and len(s.encode()) == 255 for s in strings)


# Every emulated hosted device: the per-case way starts its one-shot agent as sessions
# start theirs (HostedDevice.agent_command), so adb-emu runs it through the glibc bundle.
HOSTED_EMULATED = {
    "host": (),
    "ssh-emu": ("/usr/sbin/sshd", "qemu-aarch64"),
    "adb-emu": ("adb", "qemu-aarch64"),
}


@pytest.mark.slow
@pytest.mark.parametrize("device", sorted(HOSTED_EMULATED))
def test_bench_on_every_emulated_hosted_device_writes_all_figures(tmp_path, capsys, device):
    if HOSTED_EMULATED[device]:
        require(*HOSTED_EMULATED[device], root=True)
    out = tmp_path / "bench.json"
    assert (
        main(
            [
                "bench",
                "--device",
                device,
                "--cases",
                "20",
                "--per-case-cases",
                "3",
                "--growth-cases",
                "2",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    (figures,) = json.loads(out.read_text())["devices"]
    assert figures["device"] == device
    for way in ("session", "round_trip", "pipelined", "per_case", "floor"):
        assert figures[way]["cases"] > 0 and figures[way]["per_second"] > 0
    assert figures["floor_ms"] > 0 and figures["floor_ratio"] > 0
    assert figures["whole_case_floor_ratio"] > 0
    assert len(figures["growth"]) == 10 and all("p50_ms" in g for g in figures["growth"])
    assert "a/b throughput" in capsys.readouterr().out


def test_floor_and_round_trip_are_sampled_in_turn() -> None:
    calls: list[str] = []

    def sampler(name: str, seconds: float) -> Callable[[], float]:
        def sample() -> float:
            calls.append(name)
            return seconds

        return sample

    first, second = sample_alternately(3, sampler("case", 0.002), sampler("echo", 0.001))
    assert calls == ["case", "echo"] * 4  # one warm-up round, then three measured
    assert (first.cases, first.p50_ms) == (3, 2.0)
    assert (second.cases, second.p50_ms) == (3, 1.0)


def test_a_sample_too_small_for_a_percentile_says_so_instead_of_a_figure() -> None:
    def figures(cases: int) -> str:
        session = Latency.of([n / 1000 for n in range(1, cases + 1)])
        pipelined = Latency.mean(cases, cases / 1000)
        return format_figures(
            DeviceFigures("host", cases, session, session, pipelined, None, None, 5, ())
        )

    fifty = figures(50).splitlines()
    assert (
        "p50   26.000 ms   p90   46.000 ms   p99 n too small   (50 cases; p99 needs 101)"
        in (fifty[1])
    )
    assert "mean   1.000 ms   (timed together: no percentiles)" in fifty[3]
    assert "p90 n too small   p99 n too small   (10 cases; p90 needs 11)" in figures(10)
    assert "n too small" not in figures(101) and "p99  100.000 ms" in figures(101)
