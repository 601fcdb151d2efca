"""A BundledProgram (``.bpte``): the user's own inputs and expected outputs per method,
checked on a device (``et.check_program``, ``send --program``), and hostile files refused
in one line.

The ``.bpte`` files are written here without torch: the wheel's ``flatc`` compiles a
JSON rendering against ``tests/programs/bundled_program.fbs`` (the format's layout), around
a committed program. ``two_methods.pte``'s ``scaled`` computes ``cumsum(2 * x)``, so its
expected outputs are computed here; ``forward``'s for the agent's seeded inputs are torch's
(``tests/programs/outputs.json``).
"""

from __future__ import annotations

import contextlib
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from harness.check.expected_outputs import ExpectedOutput, Tolerance, first_off
from harness.check.output_effects import OutputsOffReference
from harness.cli.main import main
from harness.data.messages import LoadPath, Outcome
from harness.data.options import OptionsMap
from harness.data.outputs import TensorOutput, input_values
from harness.profiles.device_profile import load_profile
from harness.programs.bundled import (
    MAX_TEST_CASES,
    inputs_file,
    parse_bundled,
    read_checked,
)
from harness.programs.contents import ProgramError
from harness.programs.flatc import compile_json
from harness.runner import open_runner
from harness.runner.program_check import MethodFailed
from harness.runtime.wheel_sdk import ensure_sdk

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
OPTIONS = OptionsMap.from_dict({"XnnpackBackend": {"weight_cache_enabled": True}})
GIVEN = (1.5, -2.0, 0.0, 3.25, 1000.0, -0.5, 7.0, 0.125)
OTHER = (-4.0, 0.25, 9.5, -100.0, 2.0, 0.0, -0.75, 64.0)


def _tensor(values: tuple[float, ...], scalar_type: int = 6) -> dict[str, object]:
    data = struct.pack(f"<{len(values)}f", *values)
    return {
        "val_type": "Tensor",
        "val": {"scalar_type": scalar_type, "sizes": [1, len(values)], "data": list(data)},
    }


def _scaled(x: tuple[float, ...]) -> tuple[float, ...]:
    """What ``scaled`` computes in float32: cumsum(2 * x)."""
    total, out = 0.0, []
    for v in x:
        total = struct.unpack("<f", struct.pack("<f", total + 2 * v))[0]
        out.append(total)
    return tuple(out)


def _case(inputs: list[dict[str, object]], expected: list[dict[str, object]]) -> dict[str, object]:
    return {"inputs": inputs, "expected_outputs": expected}


def _bundle(suites: dict[str, list[dict[str, object]]], program: str = "two_methods.pte") -> bytes:
    data = {
        "version": 0,
        "method_test_suites": [
            {"method_name": name, "test_cases": cases} for name, cases in suites.items()
        ],
        "program": list((PROGRAMS / program).read_bytes()),
    }
    return compile_json(
        ensure_sdk("x86_64").flatc, PROGRAMS / "bundled_program.fbs", data, "a test .bpte"
    )


def _good_suites(wrong: bool = False) -> dict[str, list[dict[str, object]]]:
    """``scaled``: two cases of the test's own inputs (case 0's element 4 expected 0.01 off
    2005.5, within rtol 1e-5); ``forward``: the seeded inputs with torch's outputs.
    ``wrong``: case 1's element 5 expected 1 more than it is."""
    given = list(_scaled(GIVEN))
    given[4] += 0.01
    other = list(_scaled(OTHER))
    if wrong:
        other[5] += 1.0
    forward = json.loads((PROGRAMS / "outputs.json").read_text())["two_methods.pte"]["forward"]
    return {
        "scaled": [
            _case([_tensor(GIVEN)], [_tensor(tuple(given))]),
            _case([_tensor(OTHER)], [_tensor(tuple(other))]),
        ],
        "forward": [_case([_tensor(input_values("f32", 0, 8))], [_tensor(tuple(forward))])],
    }


def test_a_bundled_programs_cases_run_with_their_inputs_and_pass(tmp_path: Path) -> None:
    """Each test case's inputs reach the agent: ``scaled`` computes cumsum(2x) of the
    case's own values on every load path, with and without the map and through
    set_option, and the outputs agree with the expected ones (forward's are torch's)."""
    bpte = tmp_path / "model.bpte"
    bpte.write_bytes(_bundle(_good_suites()))
    opened, runner = open_runner(load_profile("host"))
    with contextlib.closing(opened), contextlib.closing(runner):
        checked = runner.check_program(bpte, OPTIONS)
    checked.raise_for_differences()
    assert checked.ok and not checked.off_reference and not checked.effects, checked.render()
    paths = len(runner.load_paths)
    assert len(checked.results) == 3 * paths
    for case, x in ((0, GIVEN), (1, OTHER)):
        runs = [r for r in checked.results if r.method == "scaled" and r.case == case]
        assert len(runs) == paths
        assert all(r.outputs[0].elements == _scaled(x) for r in runs)
    seeded = _scaled(input_values("f32", 0, 8))
    assert all(r.outputs[0].elements != seeded for r in checked.results if r.method == "scaled")
    # The agent compared every element itself (outputs too large to travel included).
    assert {r.verdict.report.fact("expected") for r in checked.results} == {"ok"}
    assert "2 methods (3 test cases) x load paths" in checked.render()


def test_a_wrong_expected_element_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An expected element the method does not compute (beyond the tolerance) fails the
    check: the first line names the method, the test case, the output, the element, the
    expected and the got value; ``send --program`` exits 1 with that line."""
    bpte = tmp_path / "wrong.bpte"
    bpte.write_bytes(_bundle(_good_suites(wrong=True)))
    got = _scaled(OTHER)[5]
    opened, runner = open_runner(load_profile("host"))
    with contextlib.closing(opened), contextlib.closing(runner):
        checked = runner.check_program(bpte, OPTIONS)
    assert not checked.ok
    with pytest.raises(OutputsOffReference) as raised:
        checked.raise_for_differences()
    first = str(raised.value).splitlines()[0]
    assert first.startswith("method 'scaled', test case 1, load path program (without the map)")
    assert f"output 0 element 5: expected {got + 1:g}, got {got:g}" in first, first
    assert "rtol 1e-05, atol 1e-08" in first
    assert all("test case 1" in line for line in str(raised.value).splitlines())
    case_1 = [r.verdict.report for r in checked.results if r.case == 1]
    assert {r.fact("expected") for r in case_1} == {
        f"output 0 element 5: expected {got + 1:g}, got {got:g}"
    }

    assert main(["send", "--device", "host", "--program", str(bpte)]) == 1
    out = capsys.readouterr().out
    assert "test cases: 'scaled' 2, 'forward' 1" in out
    assert "FAILED: method 'scaled', test case 1, load path program (with the map)" in out


@pytest.mark.parametrize(
    ("inputs", "said"),
    [
        ([_tensor(GIVEN), _tensor(GIVEN)], 'holds 2 inputs, method "scaled" takes 1'),
        ([{"val_type": "Int", "val": {"int_val": 3}}], "input 0: a scalar the method does not"),
        (
            [{"val_type": "Tensor", "val": {"scalar_type": 4, "sizes": [1, 8], "data": [0] * 64}}],
            "input 0: scalar type 4 rank 2, the method takes scalar type 6 rank 2",
        ),
    ],
    ids=["count", "int-for-tensor", "dtype"],
)
def test_inputs_that_do_not_fit_the_method_are_refused_by_the_agent(
    tmp_path: Path, inputs: list[dict[str, object]], said: str
) -> None:
    """A test case whose inputs the method does not take: the agent refuses to run it,
    naming its inputs file, the input and both sides."""
    bpte = tmp_path / "unfit.bpte"
    bpte.write_bytes(_bundle({"scaled": [_case(inputs, [])]}))
    opened, runner = open_runner(load_profile("host"))
    with contextlib.closing(opened), contextlib.closing(runner):
        checked = runner.check_program(bpte, OptionsMap())
    with pytest.raises(MethodFailed) as raised:
        checked.raise_for_differences()
    first = str(raised.value).splitlines()[0]
    assert "method 'scaled' failed" in first
    assert f".inputs: {said}" in first, first


def test_a_cut_bundled_program_is_refused_in_one_line(tmp_path: Path) -> None:
    data = _bundle(_good_suites())
    for cut in (len(data) // 2, len(data) - 40, 12):
        with pytest.raises(ProgramError) as raised:
            parse_bundled(data[:cut], "cut.bpte")
        message = str(raised.value)
        assert "\n" not in message and message.startswith("cut.bpte: "), message
    path = tmp_path / "cut.bpte"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ProgramError, match=r"cut\.bpte: "):
        read_checked(path)


def test_counts_over_the_limits_are_refused_naming_the_field_and_the_limit() -> None:
    many = [_case([_tensor((1.0,))], []) for _ in range(MAX_TEST_CASES + 1)]
    with pytest.raises(ProgramError) as raised:
        parse_bundled(_bundle({"scaled": many}), "many.bpte")
    message = str(raised.value)
    assert message.startswith("many.bpte: method_test_suites[0].test_cases: ")
    assert f"{MAX_TEST_CASES + 1} entries, the harness checks at most {MAX_TEST_CASES}" in message


@pytest.mark.parametrize(
    ("suites", "expected"),
    [
        (
            {"absent": [_case([_tensor(GIVEN)], [])]},
            "method_test_suites[0].method_name: 'absent' is no method of its program",
        ),
        (
            {"scaled": [_case([_tensor(GIVEN, scalar_type=44)], [])]},
            "method_test_suites[0].test_cases[0].inputs[0]: scalar type 44",
        ),
        (
            {
                "scaled": [
                    _case(
                        [{"val_type": "Tensor", "val": {"scalar_type": 6, "sizes": [1] * 17}}], []
                    )
                ]
            },
            "method_test_suites[0].test_cases[0].inputs[0]: scalar type 6, 17 sizes []: ",
        ),
    ],
)
def test_fields_that_break_the_format_are_named(
    suites: dict[str, list[dict[str, object]]], expected: str
) -> None:
    with pytest.raises(ProgramError) as raised:
        parse_bundled(_bundle(suites), "odd.bpte")
    assert str(raised.value).startswith(f"odd.bpte: {expected}"), raised.value


def test_tensor_data_that_is_not_its_shapes_bytes_is_refused() -> None:
    value = _tensor(GIVEN)
    value["val"]["data"] = value["val"]["data"][:-4]  # type: ignore[index]
    with pytest.raises(ProgramError) as raised:
        parse_bundled(_bundle({"scaled": [_case([value], [])]}), "short.bpte")
    assert "inputs[0].data: 28 bytes, its f32 sizes [1, 8] take 32" in str(raised.value)


def test_elements_agree_as_executorchs_verifier_has_them_agree() -> None:
    """The host's comparison (the reference's), as the agent's: within atol + rtol *
    |expected|; NaN with NaN, an infinity with the same one; integers exactly."""
    tolerance = Tolerance(rtol=1e-5, atol=1e-8)
    nan, inf = float("nan"), float("inf")

    def off(
        expected: tuple[float, ...], got: tuple[float, ...] | None, dtype: str = "f32"
    ) -> str | None:
        output = TensorOutput(0, dtype, (len(expected),), "d" * 16, 0, got, 0, 1)
        return first_off([ExpectedOutput(0, expected)], [output], tolerance)

    assert off((1000.0, nan, inf), (1000.0 + 0.0099, nan, inf)) is None
    assert off((1000.5, 0.0), (1000.5 + 0.0101, 0.0)) == (
        "output 0 element 0: expected 1000.5, got 1000.5101"
    )
    assert off((0.0, 1.0), (1e-8, nan)) == "output 0 element 1: expected 1, got nan"
    assert off((inf, 0.0), (-inf, 0.0)) == "output 0 element 0: expected inf, got -inf"
    assert off((3, 4), (3, 5), "i64") == "output 0 element 1: expected 4, got 5"
    assert off((1.0, 2.0), (1.0,)) == "output 0: expected 2 elements, got 1"
    assert "did not travel" in (off((1.0, 2.0), None) or "")


def test_damaged_inputs_files_are_refused_and_never_crash_the_agent(tmp_path: Path) -> None:
    """Inputs files beside a program with bytes changed, cut short or run on: each LOAD
    is answered (the inputs refused naming the file, or run), and the agent lives on."""
    good = inputs_file("scaled", parse_bundled(_bundle(_good_suites())).cases["scaled"][0])
    rng = random.Random(4848)
    opened, runner = open_runner(load_profile("host"))
    refused = 0
    with contextlib.closing(opened), contextlib.closing(runner):
        for index in range(40):
            data = bytearray(good)
            kind = index % 3
            if kind == 0:
                for _ in range(rng.randint(1, 6)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
            elif kind == 1:
                data = data[: rng.randrange(len(data))]
            else:
                data += rng.randbytes(rng.randint(1, 16))
            inputs = tmp_path / f"damaged-{index}.inputs"
            inputs.write_bytes(bytes(data))
            remote = opened.push_program(PROGRAMS / "two_methods.pte", inputs)
            for path in (LoadPath.PROGRAM, LoadPath.MODULE):
                verdict = runner.load(
                    OptionsMap(), ["XnnpackBackend"], path=path, method="scaled", program=remote
                )
                report = verdict.report
                assert report.outcome in (Outcome.OK, Outcome.RUNTIME_ERROR), report
                if report.outcome is Outcome.RUNTIME_ERROR:
                    assert f"inputs file {remote}.inputs" in report.message, report.message
                    refused += 1
                runner.reset()
        assert runner.reset().outcome is Outcome.OK  # the same agent answers
    assert refused >= 40  # every cut and run-on file on both paths, and most changed ones


def test_the_user_program_suite_takes_a_bundled_program(tmp_path: Path) -> None:
    """``pytest suites/test_user_program.py --program model.bpte``: the test of your
    program fails on the wrong expected element, with the line ``send`` gives."""
    bpte = tmp_path / "wrong.bpte"
    bpte.write_bytes(_bundle(_good_suites(wrong=True)))
    argv = [sys.executable, "-m", "pytest", "suites/test_user_program.py", "-q"]
    argv += ["-p", "no:cacheprovider", "-k", "test_your_program", "--device", "host"]
    argv += ["--program", str(bpte), "--results-dir", str(tmp_path / "results")]
    done = subprocess.run(
        argv,
        cwd=PROGRAMS.parent.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout, done.stdout
    assert "OutputsOffReference: method 'scaled', test case 1, load path program" in done.stdout
