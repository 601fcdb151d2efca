"""What the options did (harness/runner/program_effects.py, harness/check/output_effects.py):
a result-invariant option that changes an output element fails ``send --program`` and
``et.check_program`` with one line naming it; the outputs travel as data (dtype, shape,
digest, elements) and the agent's seeded inputs are reproduced in Python."""

from __future__ import annotations

import contextlib
import itertools
import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
from test_fault_injection import fault_profile, shim  # noqa: F401  (the fixture)

from harness.check import Verdict
from harness.check.option_contracts import ContractError, judged_effects
from harness.check.output_effects import OptionsChangedOutputs, first_change
from harness.cli.main import main
from harness.codec.mapfile import MapFileError, read_map_file
from harness.data.effects import Changes, OptionEffect
from harness.data.messages import LoadPath
from harness.data.options import OptionsMap
from harness.data.outputs import TensorOutput, digest_of, input_values, outputs_of
from harness.profiles.device_profile import load_profile
from harness.programs.contents import MethodContents
from harness.programs.probe_program import probe_program
from harness.results.records import VerdictRecord
from harness.runner import open_runner
from harness.runner.program_effects import Run, Target, effects_of
from harness.untrusted.trust import TRUSTED_PROFILES_ENV

if TYPE_CHECKING:
    from harness.runner import CaseRunner

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"
WEIGHT_CACHE = "backends:\n  XnnpackBackend:\n    - {key: weight_cache_enabled, value: true}\n"
TWO_OPTIONS = (
    "backends:\n  XnnpackBackend:\n    - {key: workspace_sharing_mode, value: 1}\n"
    "    - {key: weight_cache_enabled, value: false}\n"
)


@pytest.fixture
def faulty_host(
    shim: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """A host profile whose agent runs under the fault shim: a real backend whose init
    got any option writes -3.9e-32 into its output (the options arrive exactly)."""
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(tmp_path))
    return fault_profile(shim, "real_option_changes_output", tmp_path)


def test_an_option_that_changes_the_outputs_fails_send_in_one_line(
    faulty_host: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Delivered exactly, yet the outputs differ: exit 1, a line naming the backend, the
    option, the method, the path, the output, the element and both values."""
    options = tmp_path / "map.yaml"
    options.write_text(WEIGHT_CACHE)
    program = str(PROGRAMS / "xnnpack.pte")
    code = main(
        ["send", "--program", program, "--options", str(options), "--device", str(faulty_host)]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "1 option exact" in out  # delivery says nothing is wrong
    failed = [line for line in out.splitlines() if line.startswith("FAILED: ")]
    assert failed[0] == (
        "FAILED: XnnpackBackend option weight_cache_enabled=True (result-invariant, yet "
        "changed the outputs): method 'forward', load path program (at load time), load 1 "
        "execute 1, output 0 element 0: -3.9e-32 where the run without them gave 51.993504"
    ), out
    assert len(failed) == 4, out  # every load path; set_option hands init no specs: unchanged
    # Left out, the same program on the same device passes.
    assert main(["send", "--program", program, "--device", str(faulty_host)]) == 0


def test_the_smallest_set_of_options_is_named(faulty_host: Path) -> None:
    """Of two options, each alone changes the outputs under the fault: the first alone is
    named, through the API's exception too."""
    opened, runner = open_runner(load_profile(str(faulty_host)))
    with contextlib.closing(opened), contextlib.closing(runner):
        sent = OptionsMap.from_dict(
            {"XnnpackBackend": {"workspace_sharing_mode": 1, "weight_cache_enabled": False}}
        )
        checked = runner.check_program(PROGRAMS / "xnnpack.pte", sent)
        assert not checked.ok
        with pytest.raises(OptionsChangedOutputs) as raised:
            checked.raise_for_differences()
    first = str(raised.value).splitlines()[0]
    assert first.startswith("XnnpackBackend option workspace_sharing_mode=1 (result-invariant")
    assert "weight_cache_enabled" not in first


def test_real_options_leave_the_committed_programs_outputs_unchanged_on_host() -> None:
    """Without a fault, each real XnnpackBackend option, at load time and through
    set_option, over three executes and two loads, changes nothing, and the outputs are
    torch's for the agent's seeded inputs (outputs.json)."""
    reference = json.loads((PROGRAMS / "outputs.json").read_text())
    opened, runner = open_runner(load_profile("host"))
    recorded: list[Verdict] = []
    runner.on_verdict = recorded.append
    checks = 0
    with contextlib.closing(opened), contextlib.closing(runner):
        for name, value in (("weight_cache_enabled", True), ("workspace_sharing_mode", 2)):
            sent = OptionsMap.from_dict({"XnnpackBackend": {name: value}})
            for program in ("xnnpack.pte", "two_methods.pte"):
                checked = runner.check_program(
                    PROGRAMS / program, sent, reference=reference[program]
                )
                checked.raise_for_differences()
                assert checked.ok and not checked.effects, checked.render()
                assert all(r.outputs and r.outputs[0].elements for r in checked.results)
                # The test's records hold the delivery checks, not the runs for outputs.
                assert recorded[-len(checked.results) :] == [r.verdict for r in checked.results]
                checks += len(checked.results)
                assert len(recorded) == checks


def test_outputs_travel_as_data_and_the_inputs_are_seeded() -> None:
    """A LOAD report describes its outputs: dtype, shape, a digest of the bytes, the
    elements; the method computed them from the seeded inputs Python reproduces."""
    opened, runner = open_runner(load_profile("host"))
    with contextlib.closing(opened), contextlib.closing(runner):
        checked = runner.check_program(PROGRAMS / "two_methods.pte", OptionsMap())
    scaled = next(r for r in checked.results if r.method == "scaled")
    (output,) = scaled.outputs
    x = input_values("f32", 0, 8)
    assert len(set(x)) > 4 and 0.0 in x and min(x) < 0 < max(x) and max(map(abs, x)) >= 512
    assert output.dtype == "f32" and output.shape == (1, 8)
    assert output.elements == tuple(itertools.accumulate(2 * v for v in x))  # cumsum(2x)

    assert output.digest == digest_of(struct.pack("<8f", *output.elements))
    assert (output.low, output.high, output.non_finite) == (
        min(output.elements),
        max(output.elements),
        0,
    )
    assert outputs_of(scaled.verdict.report) == scaled.outputs
    # The pytest record's verdicts carry them (results.jsonl, the report).
    assert VerdictRecord.of(scaled.verdict).outputs == (output.render(),)


def test_the_first_change_is_bitwise() -> None:
    """-0 differs from 0; a NaN equals a NaN; elements that did not travel compare by digest."""

    def out(elements: tuple[float, ...] | None, digest: str = "d") -> TensorOutput:
        return TensorOutput(0, "f32", (2,), digest, 0, elements, 0.0, 1.0)

    assert first_change([out((0.0, 1.0))], [out((0.0, 1.0))]) is None
    change = first_change([out((0.0, 1.0))], [out((-0.0, 1.0))])
    assert change is not None and (change.element, change.got, change.expected) == (0, "-0", "0")
    assert first_change([out((float("nan"), 1.0))], [out((float("nan"), 1.0))]) is None
    change = first_change([out(None, "a")], [out(None, "b")])
    assert change is not None and change.element is None
    sent = OptionsMap.from_dict(
        {"XnnpackBackend": {"weight_cache_enabled": True}, "SomeoneElses": {"anything": 1}}
    )
    assert judged_effects(sent) == {("XnnpackBackend", "weight_cache_enabled"): OptionEffect()}


def test_outputs_that_vary_without_options_are_not_blamed_on_them() -> None:
    """A baseline whose own executes differ (a nondeterministic model) judges nothing:
    the effect names no option, is not a failure, and says where the outputs varied."""

    def run(label: str, first: float) -> Run:
        return Run(label, (TensorOutput(0, "f32", (2,), label, 0, (first, 1.0), 0.0, 1.0),))

    baseline = (run("load 1 execute 1", 0.5), run("load 1 execute 2", 0.25))
    method = MethodContents("forward", ("XnnpackBackend",))
    target = Target("p.pte", method, ())
    sent = OptionsMap.from_dict({"XnnpackBackend": {"weight_cache_enabled": True}})
    runner = cast("CaseRunner", None)  # never reached: nothing can be judged
    (effect,) = effects_of(runner, target, sent, LoadPath.PROGRAM, baseline, baseline)
    assert not effect.judged and effect.options == ()
    assert effect.describe() == (
        "without options the outputs vary (nothing judged): method 'forward', load path "
        "program (at load time), load 1 execute 2, output 0 element 0: 0.25 where the first "
        "execute gave 0.5"
    )


CACHE_FILE_MAP = (
    "backends:\n  XnnpackBackend:\n    - {key: weight_cache_enabled, value: true}\n"
    "    - {key: packed_cache_path, value: '{file}'}\n"
)


@pytest.mark.parametrize("fault", ["", "real_ignores_cache_path"])
def test_a_cache_path_that_leaves_no_file_fails_send(
    fault: str,
    shim: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """XNNPACK's packed_cache_path, with the weight cache on, leaves a file at load time
    (measured on 1.5.1): looked for after each load path's load. Under a backend that
    ignores it (delivered exactly, no file), a line per path names the option: exit 1.
    The check leaves no file behind."""
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(tmp_path))
    device = str(fault_profile(shim, fault, tmp_path)) if fault else "host"
    cache = tmp_path / "packed.bin"
    options = tmp_path / "map.yaml"
    options.write_text(CACHE_FILE_MAP.replace("{file}", str(cache)))
    program = str(PROGRAMS / "xnnpack.pte")
    code = main(["send", "--program", program, "--options", str(options), "--device", device])
    out = capsys.readouterr().out
    assert "4 loads, 4 exact" in out  # delivered exactly either way
    option = f"XnnpackBackend option packed_cache_path='{cache}'"
    lines = [line for line in out.splitlines() if option in line]
    assert len(lines) == 4, out  # one per load path
    if fault:
        assert code == 1, out
        assert lines[0] == (
            f"FAILED: {option} left no file at its path (a set that changed nothing): method "
            "'forward', load path program (at load time)"
        )
        assert "declared files missing in 4" in out
    else:
        assert code == 0, out
        assert all(line.startswith(f"ok: {option} left its file") for line in lines), out
    assert not cache.exists()


def test_a_numerics_option_passes_within_its_tolerance_and_fails_beyond(tmp_path: Path) -> None:
    """A user's option declared in the map file as numerics within 0.001: outputs that
    moved by 0.0005 (relative) pass, by 0.01 fail naming the tolerance; the same change
    without a declaration is a note, unjudged."""
    options = tmp_path / "map.yaml"
    options.write_text(
        "backends:\n  NpuBackend:\n"
        "    - {key: fast_math, value: true, effect: numerics, tolerance: 0.001}\n"
        "  OtherBackend:\n    - {key: mode, value: 1}\n"
    )
    declared = read_map_file(options)
    judged = judged_effects(declared.options, declared=declared.effects)
    assert judged == {("NpuBackend", "fast_math"): OptionEffect(Changes.NUMERICS, 0.001)}

    def run(value: float) -> Run:
        return Run("load 1 execute 1", (TensorOutput(0, "f32", (2,), "d", 0, (value, 1.0), 0, 1),))

    baseline = (run(100.5),)
    runner = cast("CaseRunner", None)  # one option: no narrowing runs
    for backend, key, judged_here in (
        ("NpuBackend", "fast_math", True),
        ("OtherBackend", "mode", False),
    ):
        sent = OptionsMap.from_dict({backend: {key: True}})
        target = Target("p.pte", MethodContents("forward", (backend,)), (), judged)
        within = effects_of(runner, target, sent, LoadPath.PROGRAM, baseline, (run(100.55),))
        (beyond,) = effects_of(runner, target, sent, LoadPath.PROGRAM, baseline, (run(101.5),))
        assert beyond.judged is judged_here
        if judged_here:
            assert within == []
            assert beyond.describe().startswith(
                "NpuBackend option fast_math=True (numerics within 0.001, yet beyond it changed "
                "the outputs): method 'forward'"
            )
            assert beyond.describe().endswith(
                "output 0 element 0: 101.5 where the run without them gave 100.5"
            )
        else:
            assert within and not within[0].judged  # bit for bit: a note


@pytest.mark.parametrize(
    ("entry", "field", "says"),
    [
        ("{key: k, value: 1, effect: numerics}", "[0].tolerance", "has a tolerance"),
        ("{key: k, value: 1, effect: numerics, tolerance: 2.0}", "[0].tolerance", "(0, 1]"),
        ("{key: k, value: 1, effect: faster}", "[0].effect", "nothing, numerics, file"),
        ("{key: k, value: 1, effect: nothing, when: {a: 1}}", "[0].when", "only a file"),
    ],
)
def test_a_declared_effect_that_cannot_be_is_one_line(
    entry: str, field: str, says: str, tmp_path: Path
) -> None:
    """Untrusted input: the file, the field and the fix in one line."""
    options = tmp_path / "map.yaml"
    options.write_text(f"backends:\n  NpuBackend:\n    - {entry}\n")
    with pytest.raises(MapFileError) as raised:
        read_map_file(options)
    (line,) = str(raised.value).splitlines()
    assert line.startswith(f"{options}: backends.NpuBackend{field}: ") and says in line, line


def test_a_declaration_that_contradicts_a_contract_is_refused(tmp_path: Path) -> None:
    """The harness's contract speaks for XNNPACK's options: a map cannot loosen it."""
    options = tmp_path / "map.yaml"
    options.write_text(
        "backends:\n  XnnpackBackend:\n"
        "    - {key: weight_cache_enabled, value: true, effect: numerics, tolerance: 0.1}\n"
    )
    declared = read_map_file(options)
    with pytest.raises(ContractError) as raised:
        judged_effects(declared.options, declared=declared.effects)
    assert str(raised.value) == (
        f"{options}: backends.XnnpackBackend[0]: XnnpackBackend's contract declares "
        "weight_cache_enabled result-invariant; leave 'effect' out of the map for this option"
    )


def test_a_probe_option_declared_to_leave_a_file_that_leaves_none_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The map declares a probe's option a file effect; the probe records it and writes
    nothing: each load path's line says so, exit 1. A relative path cannot be looked
    for: a note, exit 0."""
    program = str(probe_program(("ProbeA",)))
    options = tmp_path / "map.yaml"
    dump = tmp_path / "dump.bin"
    for value, code in ((str(dump), 1), ("dump.bin", 0)):
        options.write_text(
            f"backends:\n  ProbeA:\n    - {{key: dump, value: '{value}', effect: file}}\n"
        )
        argv = ["send", "--program", program, "--probe", "ProbeA", "--options", str(options)]
        assert main([*argv, "--device", "host"]) == code
        out = capsys.readouterr().out
        lines = [line for line in out.splitlines() if "ProbeA option dump=" in line]
        assert len(lines) == 2 * 4, out  # two methods, four load paths
        if code:
            assert lines[0] == (
                f"FAILED: ProbeA option dump='{dump}' left no file at its path (a set that "
                "changed nothing): method 'forward', load path program (at load time)"
            )
        else:
            assert lines[0].startswith(
                "note: ProbeA option dump='dump.bin': its file was not looked for (give an "
                "absolute path"
            )
        assert out.splitlines()[-2].endswith(
            f"delivered ✓, outputs unchanged ✓, effect observed {'✗' if code else '-'}"
        ), out
