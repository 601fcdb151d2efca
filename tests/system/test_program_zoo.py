"""The zoo (``tests/programs/zoo/``, exported by ``export.py`` from ``zoo.py``): one small
program per operator family XNNPACK's partitioner takes, run on host, ssh-emu and adb-emu
under every load-time value of XnnpackBackend's options and every pair of them, through
``et.check_program``: every load path, 3 executes x 2 loads and ``set_option``, the
outputs unchanged by the options (bit for bit) and torch's for the agent's seeded inputs.

A sample runs with the project tests; the whole zoo, and the whole zoo on host-memcheck
(the agent under valgrind's memcheck, the weight cache on, off and left alone), are marked
nightly (``.github/workflows/nightly.yml``). What the zoo found upstream
(docs/findings.md) is a strict expected failure that names it and checks it is still that
failure, so a wheel that fixes it shows as XPASS, a failure."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import posixpath
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from run_environment import run_environment

from harness.check.option_contracts import CONTRACTS, Route
from harness.check.output_effects import OptionsChangedOutputs
from harness.data.options import OptionsMap, OptionValue
from harness.devices.hosted import HostedDevice
from harness.profiles.device_profile import load_profile
from harness.programs.contents import read_program
from harness.runner import CaseRunner, open_runner
from harness.runner.program_check import ProgramCheck
from harness.runtime.race_detector import RaceReported

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "tests" / "programs" / "zoo"
REFERENCE: dict[str, dict[str, list[float]]] = json.loads((ZOO / "outputs.json").read_text())
XNN = "XnnpackBackend"
DEVICES = ("host", "ssh-emu", "adb-emu")
MEMCHECK = "host-memcheck"  # the host agent under valgrind's memcheck (docs/agent.md)
# torch's fake-quantized model and XNNPACK's int8 kernels round differently: a quantized
# program's outputs are within this share of its largest reference element.
QUANTIZED = ("conv2d_static_qint8.pte", "linear_dynamic_qint8.pte", "linear_static_qint8.pte")
QUANTIZED_TOLERANCE = 0.05
CACHE_FILE = "{work}/zoo-packed-cache.bin"  # in the device's work directory
Values = tuple[tuple[str, OptionValue], ...]  # a map of XnnpackBackend's options
# Every load-time value of XnnpackBackend's options (docs/agent.md, "Real backends").
VALUES: Values = (
    ("workspace_sharing_mode", 0),
    ("workspace_sharing_mode", 1),
    ("workspace_sharing_mode", 2),
    ("weight_cache_enabled", True),
    ("weight_cache_enabled", False),
    ("packed_cache_path", CACHE_FILE),
)
MAPS = [(v,) for v in VALUES] + [
    pair for pair in itertools.combinations(VALUES, 2) if pair[0][0] != pair[1][0]
]
# On host-memcheck: no map (the default), and the weight cache on and off.
MEMCHECK_MAPS: tuple[Values, ...] = (
    (),
    (("weight_cache_enabled", True),),
    (("weight_cache_enabled", False),),
)


class OffTorch(AssertionError):
    """A quantized program's outputs are further from torch's than rounding explains."""


@dataclass(frozen=True)
class KnownBug:
    """An upstream bug the zoo found (docs/findings.md): the cases it fails, and how."""

    reason: str
    programs: tuple[str, ...]
    devices: tuple[str, ...]
    option: tuple[str, OptionValue] | None  # the option that shows it; None: any map
    raises: type[AssertionError]
    frame: str = ""  # on host-memcheck, a function the report names

    def fails(self, device: str, program: str, values: Values) -> bool:
        return (
            program in self.programs
            and device in self.devices
            and (self.option is None or self.option in values)
        )


KNOWN = (
    # With XNNPACK's weight cache on, a PReLU's slope is read from freed memory: the
    # outputs are garbage (-0, -6.5e-37, 3e+27 where torch gives 0.5748), other values on
    # every load.
    KnownBug(
        "executorch 1.5.1: XnnpackBackend weight_cache_enabled=true changes prelu.pte's "
        "outputs, a PReLU's slope read after the weight cache freed it (docs/findings.md)",
        ("prelu.pte",),
        DEVICES,
        ("weight_cache_enabled", True),
        OptionsChangedOutputs,
    ),
    # The same bug under valgrind's memcheck, which does not reuse the freed block: the
    # outputs are right, the kernel's read of the slope is reported.
    KnownBug(
        "executorch 1.5.1: with XnnpackBackend weight_cache_enabled=true memcheck reports "
        "prelu.pte's PReLU kernel reading the slope XNNWeightsCache::finalize_for_runtime "
        "freed (docs/findings.md)",
        ("prelu.pte",),
        (MEMCHECK,),
        ("weight_cache_enabled", True),
        RaceReported,
        "XNNWeightsCache::finalize_for_runtime",
    ),
    # On the emulated arm64 CPU (qemu-user's default, "max"), statically quantized
    # convolution and linear compute wrong elements, the same ones on every path, with or
    # without options: the odd ones of the linear's output, of each channel of the conv's.
    KnownBug(
        "executorch 1.5.1 on qemu-aarch64 7.2 -cpu max: statically quantized conv2d and "
        "linear give wrong output elements (docs/findings.md)",
        ("conv2d_static_qint8.pte", "linear_static_qint8.pte"),
        ("ssh-emu", "adb-emu"),
        None,
        OffTorch,
    ),
)
# The project tests' sample: a program of each kind under a pair of options, both keys of
# each known bug's among them (the whole zoo under every map is nightly).
SAMPLE: tuple[tuple[str, Values], ...] = (
    ("conv2d_relu.pte", (("workspace_sharing_mode", 0), ("packed_cache_path", CACHE_FILE))),
    (
        "linear_static_qint8.pte",
        (("weight_cache_enabled", True), ("packed_cache_path", CACHE_FILE)),
    ),
    ("prelu.pte", (("workspace_sharing_mode", 2), ("weight_cache_enabled", True))),
)


def _map_id(values: Values) -> str:
    if not values:
        return "default"
    return "+".join(f"{key}={value}" for key, value in values).replace(CACHE_FILE, "P")


def _cases(
    pairs: tuple[tuple[str, Values], ...], nightly: bool = False, devices: tuple[str, ...] = DEVICES
) -> list:
    """Each (program, map) on each device; a known bug's cases a strict xfail naming it."""
    cases = []
    for device, (program, values) in itertools.product(devices, pairs):
        marks = [
            pytest.mark.xfail(strict=True, raises=bug.raises, reason=bug.reason)
            for bug in KNOWN
            if bug.fails(device, program, values)
        ] + ([pytest.mark.nightly] if nightly else [])
        case = f"{'zoo' if nightly else 'sample'}-{device}-{program}-{_map_id(values)}"
        cases.append(pytest.param(device, program, values, marks=marks, id=case))
    return cases


def test_the_zoo_files_are_the_exported_ones() -> None:
    """SHA256SUMS (written by export.py) matches every file; every program has a reference."""
    lines = (ZOO / "SHA256SUMS").read_text().splitlines()
    sums = {name: digest for digest, name in (line.split("  ") for line in lines)}
    programs = sorted(p.name for p in ZOO.glob("*.pte"))
    assert sorted(sums) == sorted([*programs, "outputs.json"])
    for name, digest in sums.items():
        assert hashlib.sha256((ZOO / name).read_bytes()).hexdigest() == digest, name
    assert sorted(REFERENCE) == programs
    known = {program for bug in KNOWN for program in bug.programs}
    assert {*(program for program, _ in SAMPLE), *QUANTIZED, *known} <= set(programs)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_each_zoo_program_is_delegated_to_xnnpack_and_small(name: str) -> None:
    """One method, ``forward``, XNNPACK's; a few KB; an output whose elements travel."""
    (method,) = read_program(ZOO / name).methods
    assert method.name == "forward" and XNN in method.delegates, method
    assert (ZOO / name).stat().st_size < 10_000
    assert 0 < len(REFERENCE[name]["forward"]) <= 120  # 480 bytes (docs/wire-format.md)


def test_the_maps_are_every_load_time_value_and_every_pair() -> None:
    contract = CONTRACTS[XNN]
    keys = {rule.key for rule in contract.options if Route.LOAD in rule.routes}
    assert {key for key, _ in VALUES} == keys
    for rule in contract.options:
        if rule.key in keys and rule.low is not None and rule.high is not None:
            assert {v for k, v in VALUES if k == rule.key} == set(range(rule.low, rule.high + 1))
    assert len(MAPS) == len(VALUES) + 3 * 2 + 3 + 2


@pytest.fixture(scope="module")
def zoo_runner() -> Iterator[Callable[[str], tuple[CaseRunner, HostedDevice]]]:
    """A runner on each device, opened once for the module, and the device."""
    opened: dict[str, tuple[CaseRunner, HostedDevice]] = {}
    with contextlib.ExitStack() as stack:

        def runner(device: str) -> tuple[CaseRunner, HostedDevice]:
            if device not in opened:
                on, runs = open_runner(load_profile(device))
                stack.callback(on.close)
                stack.callback(runs.close)  # the runner closes first
                assert isinstance(on, HostedDevice)
                opened[device] = (runs, on)
            return opened[device]

        yield runner


def _options(values: Values, work_dir: str) -> OptionsMap:
    path = posixpath.join(work_dir, posixpath.basename(CACHE_FILE))
    return OptionsMap.from_dict(
        {XNN: {key: path if value == CACHE_FILE else value for key, value in values}}
    )


def _off_torch(checked: ProgramCheck, expected: list[float]) -> dict[str, list[int]]:
    """Per load path, the elements of a quantized program's output further from torch's
    than rounding explains (a share of its largest element)."""
    tolerance = QUANTIZED_TOLERANCE * max(abs(v) for v in expected)
    off = {}
    for result in checked.results:
        got = result.outputs[0].elements
        assert got is not None and len(got) == len(expected), result.path
        wrong = [
            i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if abs(g - e) > tolerance
        ]
        if wrong:
            off[result.path.label] = wrong
    return off


@pytest.mark.parametrize(
    ("device", "program", "values"),
    _cases(SAMPLE) + _cases(tuple(itertools.product(sorted(REFERENCE), MAPS)), nightly=True),
)
def test_the_zoo_under_the_options(
    zoo_runner: Callable[[str], tuple[CaseRunner, HostedDevice]],
    device: str,
    program: str,
    values: Values,
) -> None:
    """One program under one map on one device: no option changes an output, the outputs
    are torch's; a known upstream bug must still fail as it is known to."""
    runner, on = zoo_runner(device)
    quantized = program in QUANTIZED
    reference = None if quantized else REFERENCE[program]
    checked = runner.check_program(
        ZOO / program, _options(values, on.work_dir), reference=reference
    )
    known = [bug for bug in KNOWN if bug.fails(device, program, values)]
    for bug in known:
        if bug.option is not None:  # that option, named as the one that changed the outputs
            judged = [e for e in checked.effects if e.judged]
            assert judged, f"{bug.reason}: no longer changes the outputs\n{checked.render()}"
            assert all((XNN, *bug.option) in e.options for e in judged), checked.render()
    checked.raise_for_differences()
    if quantized and (off := _off_torch(checked, REFERENCE[program]["forward"])):
        if known:  # the same elements on every path, element 1 among them, not 0
            paths = [result.path.label for result in checked.results]
            first = off.get(paths[0], [])
            assert list(off) == paths and all(w == first for w in off.values()), off
            assert 1 in first and 0 not in first, off
        raise OffTorch(f"{program} on {device}: elements off torch's, by load path: {off}")


@pytest.mark.parametrize(
    ("device", "program", "values"),
    _cases(tuple(itertools.product(sorted(REFERENCE), MEMCHECK_MAPS)), True, (MEMCHECK,)),
)
def test_the_zoo_on_memcheck(
    zoo_runner: Callable[[str], tuple[CaseRunner, HostedDevice]],
    device: str,
    program: str,
    values: Values,
    tmp_path: Path,
) -> None:
    """One program under one map on host-memcheck, through ``et.check_program``: a memory
    error memcheck reports meanwhile fails the case with the report's first frames (its
    agent stopped after, so that each case's reports are its own); then the outputs as on
    host. A known bug's report must name the frame it is known by."""
    runner, on = zoo_runner(device)
    reference = None if program in QUANTIZED else REFERENCE[program]
    options = _options(values, on.work_dir) if values else None
    kept = tmp_path / "memcheck-report.txt"
    try:
        checked = runner.check_program(ZOO / program, options, reference=reference)
    finally:
        runner.restart()  # what memcheck writes at the agent's exit is this case's too
        assert on.race_log is not None, f"{device} runs no memory checker"
        check = on.race_log.take()
        kept.write_text(check.artifact_text())
    for bug in KNOWN:
        if bug.fails(device, program, values):
            texts = [finding.report.text for finding in check.unsuppressed]
            assert any(bug.frame in text for text in texts), f"{bug.reason}: not reported"
    check.raise_for_findings(str(kept))
    checked.raise_for_differences()


def _on_memcheck(
    tmp_path: Path, weight_cache: bool
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """prelu.pte through the user-program suite on host-memcheck, the weight cache on or
    off; the run and its results folder."""
    options = tmp_path / "map.yaml"
    options.write_text(
        f"backends:\n  {XNN}: {{weight_cache_enabled: {str(weight_cache).lower()}}}\n"
    )
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/test_user_program.py", "-p", "no:cacheprovider",
         "-k", "test_your_program", "--device", "host-memcheck", "--program",
         str(ZOO / "prelu.pte"), "--options", str(options), "--results-dir", str(results)],
        cwd=ROOT, env=run_environment(), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    return done, results


@pytest.mark.nightly
@pytest.mark.parametrize("weight_cache", [False, True], ids=["weight-cache-off", "weight-cache-on"])
def test_memcheck_sees_the_prelu_slope_read_after_free(tmp_path: Path, weight_cache: bool) -> None:
    """On host-memcheck the first finding is an invalid read whatever the outputs (valgrind
    does not reuse the freed block, so they happen to be right there): the slope that
    ``XNNWeightsCache::finalize_for_runtime`` freed, read by the PReLU kernel. Without the
    weight cache the same program passes. When a fixed wheel is pinned, the test with it
    on fails, saying so."""
    done, results = _on_memcheck(tmp_path, weight_cache)
    if not weight_cache:
        assert done.returncode == 0, done.stdout[-3000:]
        return
    assert done.returncode == 1, f"{KNOWN[0].reason}: no longer reported\n{done.stdout[-3000:]}"
    assert "RaceReported: memcheck reported 1 memory error report" in done.stdout, done.stdout
    (report,) = results.rglob("memcheck-report.txt")
    text = report.read_text()
    assert "Invalid read of size 4" in text and "XNNWeightsCache::finalize_for_runtime" in text
