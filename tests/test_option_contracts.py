"""Options that will have no effect, named (harness/check/option_contracts.py): by the
contract of each backend the harness knows, a warning beside an exact verdict in
``send``, ``et.check_program`` and pytest's output; a failure with ``--strict-options``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.agent.xnnpack_program import xnnpack_program
from harness.check import (
    CONTRACTS,
    NoEffect,
    OptionsWithoutEffect,
    Route,
    judge_options,
)
from harness.check.option_contracts import OTHER_BACKENDS
from harness.cli.main import main
from harness.data.options import OptionsMap
from harness.program_check import ProgramCheck

ROOT = Path(__file__).resolve().parent.parent
# The map: a wrong-typed and a misspelled XNNPACK key, and a load-time QNN option.
MAP_TEXT = """backends:
  XnnpackBackend:
    - {key: workspace_sharing_mode, value: true}
    - {key: workspace_sharing_modee, value: 1}
  QnnBackend:
    - {key: qnn_runtime_log_level, value: 3}
"""
MAP = OptionsMap.from_dict(
    {
        "XnnpackBackend": {"workspace_sharing_mode": True, "workspace_sharing_modee": 1},
        "QnnBackend": {"qnn_runtime_log_level": 3},
    }
)
WARNED = [
    ("XnnpackBackend", "workspace_sharing_mode", NoEffect.WRONG_TYPE),
    ("XnnpackBackend", "workspace_sharing_modee", NoEffect.UNKNOWN_KEY),
    ("QnnBackend", "qnn_runtime_log_level", NoEffect.NOT_READ),
]


def test_each_option_without_effect_is_named_with_why() -> None:
    found = judge_options(MAP, Route.LOAD)
    assert [(w.backend, w.key, w.kind) for w in found] == WARNED
    wrong_type, misspelled, qnn = (w.text for w in found)
    assert "(bool true): XnnpackBackend reads an int 0..2" in wrong_type
    assert "uses the global value (set_option's) instead" in wrong_type
    assert "not an option XnnpackBackend knows (nearest: workspace_sharing_mode)" in misspelled
    assert "QnnBackend reads no options at load time (only through set_option)" in qnn


def test_what_a_backend_ignores_depends_on_the_route() -> None:
    """Through set_option QNN reads its keys (a wrong type is skipped); XNNPACK refuses a
    wrong type there, and reads save_weight_cache_on_disk there only."""
    options = OptionsMap.from_dict(
        {
            "XnnpackBackend": {"workspace_sharing_mode": 3, "save_weight_cache_on_disk": True},
            "QnnBackend": {"qnn_runtime_log_level": "3", "qnn_runtime_profile_level": 1},
            "OpenvinoBackend": {"device": "CPU"},
        }
    )
    on_set = judge_options(options, Route.SET)
    assert [(w.backend, w.key, w.kind) for w in on_set] == [
        ("XnnpackBackend", "workspace_sharing_mode", NoEffect.OUT_OF_RANGE),
        ("QnnBackend", "qnn_runtime_log_level", NoEffect.WRONG_TYPE),
        ("OpenvinoBackend", "device", NoEffect.NOT_READ),
    ]
    assert "set_option refuses it with InvalidArgument" in on_set[0].text
    assert "set_option skips it and returns Ok" in on_set[1].text
    at_load = judge_options(options, Route.LOAD)
    assert [(w.key, w.kind) for w in at_load[:2]] == [
        ("workspace_sharing_mode", NoEffect.OUT_OF_RANGE),
        ("save_weight_cache_on_disk", NoEffect.NOT_READ),
    ]
    assert "init fails with InvalidArgument" in at_load[0].text
    assert "reads it through set_option only, not at load time" in at_load[1].text


def test_unknown_backends_and_probes_stay_unjudged_and_good_options_pass() -> None:
    options = OptionsMap.from_dict(
        {
            "XnnpackBackend": {"workspace_sharing_mode": 1, "weight_cache_enabled": False},
            "ProbeA": {"anything": 1},
            "SomeoneElsesBackend": {"whatever": "x"},
        }
    )
    for route in Route:
        assert judge_options(options, route, probes=("ProbeA",)) == ()
    # A key far from every known one lists them instead of a nearest.
    (far,) = judge_options(OptionsMap.from_dict({"QnnBackend": {"zz": 1}}), Route.SET)
    assert "its options: qnn_runtime_log_level," in far.text
    assert CONTRACTS["QnnBackend"].keys(Route.LOAD) == ()


@pytest.mark.parametrize("typo", ["XnnpackBakend", "QNNBackend", "OpenVinoBackend2"])
def test_a_misspelled_backend_id_is_named_with_the_nearest_on_every_route(typo: str) -> None:
    """The runtime ignores an id no backend has without a word: the options are lost."""
    options = OptionsMap.from_dict({typo: {"workspace_sharing_mode": 1, "x": 2}})
    for route in Route:
        (warned,) = judge_options(options, route)
        assert (warned.backend, warned.kind) == (typo, NoEffect.UNKNOWN_BACKEND)
        assert f"{typo}: no backend has this id (nearest: " in warned.text
        assert "its 2 options reach no backend" in warned.text
    # the harness's probes may have any id
    assert judge_options(options, Route.LOAD, probes=(typo,)) == ()


def test_executorchs_other_backends_are_never_taken_for_a_misspelling() -> None:
    options = OptionsMap.from_dict({name: {"k": 1} for name in sorted(OTHER_BACKENDS)[:8]})
    assert judge_options(options, Route.LOAD) == ()


def test_a_program_check_warns_and_fails_only_when_strict() -> None:
    warned = judge_options(MAP, Route.LOAD)
    lenient = ProgramCheck("p.pte", ("forward",), (), warned)
    assert lenient.ok
    lenient.raise_for_differences()
    text = lenient.render()
    assert text.count("warning: ") == 3
    assert text.endswith("3 options without effect (warnings above)")
    strict = ProgramCheck("p.pte", ("forward",), (), warned, strict=True)
    assert not strict.ok
    with pytest.raises(OptionsWithoutEffect, match="3 options will have no effect") as caught:
        strict.raise_for_differences()
    assert "workspace_sharing_modee" in str(caught.value)


# ---- on the host device: send and the pytest suite ------------------------------------------


@pytest.fixture
def map_file(tmp_path: Path) -> Path:
    path = tmp_path / "map.yaml"
    path.write_text(MAP_TEXT, encoding="utf-8")
    return path


def test_send_warns_beside_an_exact_verdict_and_fails_when_strict(
    map_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["send", "--program", str(xnnpack_program()), "--options", str(map_file)]
    assert main([*argv, "--device", "host"]) == 0
    out = capsys.readouterr().out
    assert "1 method x load paths = 4 loads, 4 exact; 3 options without effect" in out
    for backend, key, _ in WARNED:
        assert f"warning: {backend}: option {key} (" in out
    assert main([*argv, "--device", "host", "--strict-options"]) == 1
    assert "(--strict-options: a failure)" in capsys.readouterr().out
    # A map alone, through set_option: the misspelled key is named there too.
    assert main(["send", str(map_file), "--action", "set", "--device", "host"]) == 1
    out = capsys.readouterr().out  # exit 1: XNNPACK refuses the bool (InvalidArgument)
    assert "warning: XnnpackBackend: option workspace_sharing_modee (int 1)" in out


def test_the_suite_shows_the_warnings_and_fails_with_strict_options(
    map_file: Path, tmp_path: Path
) -> None:
    """One run: pytest's warnings summary names each option, and --strict-options fails
    the test (without it the same check passes: the send test above)."""
    command = [sys.executable, "-m", "pytest", "suites/test_user_program.py", "-q",
               "-p", "no:cacheprovider", "--tb=short", "--device", "host",
               "-k", "test_your_program", "--program", str(xnnpack_program()),
               "--options", str(map_file), "--strict-options",
               "--results-dir", str(tmp_path / "results")]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 1, done.stdout
    assert "OptionsWithoutEffect: 3 options will have no effect" in done.stdout
    summary = done.stdout.split("warnings summary", 1)[-1]
    for backend, key, _ in WARNED:
        assert f"NoEffectWarning: {backend}: option {key} (" in summary, done.stdout
