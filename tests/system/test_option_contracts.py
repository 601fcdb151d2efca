"""Options that will have no effect, named (harness/check/option_contracts.py): by the
contract of each backend the harness knows or the user declares (in code, or a project's
``backends/*.yaml``), one judgement at every door (``et.load``/``set``/``get``/
``check_program``, ``send``, ``map``): a warning, a failure with ``--strict-options``."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from harness.check import (
    CONTRACTS,
    BackendContract,
    ContractError,
    ContractFileError,
    NoEffect,
    NoEffectWarning,
    OptionRule,
    OptionsWithoutEffect,
    Route,
    RouteBehaviour,
    declare_contract,
    declare_contract_files,
    heed_options,
    judge_options,
    known_contracts,
    option_contracts,
)
from harness.check.contract_files import MAX_FILE_BYTES, MAX_FILES, read_contract_file
from harness.check.option_contracts import OTHER_BACKENDS, judged_effects
from harness.cli.main import main
from harness.data.effects import Changes, OptionEffect
from harness.data.options import OptionsMap
from harness.programs.xnnpack import xnnpack_program
from harness.runner.program_check import ProgramCheck

ROOT = Path(__file__).resolve().parents[2]
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


def test_a_program_check_counts_its_warnings() -> None:
    warned = judge_options(MAP, Route.LOAD)
    checked = ProgramCheck("p.pte", ("forward",), (), warned)
    assert checked.ok
    checked.raise_for_differences()
    assert checked.render().endswith("0 exact; 3 options without effect (warnings)")


def test_heeding_warns_at_the_callers_line_or_refuses_when_strict() -> None:
    """The one judgement every door makes: a NoEffectWarning per option, pointing at the
    line outside the harness that sent the map; strict: OptionsWithoutEffect."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = heed_options(MAP, Route.LOAD)
    assert [(w.backend, w.key, w.kind) for w in found] == WARNED
    assert [str(w.message) for w in caught] == [w.text for w in found]
    assert {w.category for w in caught} == {NoEffectWarning}
    assert {w.filename for w in caught} == {__file__}
    with pytest.warns(NoEffectWarning), pytest.raises(OptionsWithoutEffect) as refused:
        heed_options(MAP, Route.LOAD, strict=True)
    assert refused.value.warnings == found
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a map without such options: no warning at all
        assert heed_options(MAP, Route.LOAD, probes=("XnnpackBackend", "QnnBackend")) == ()


def test_a_get_is_judged_by_its_ids_and_keys_not_its_values() -> None:
    """A GET's values only say which type to read back; a misspelled key or id reads nothing."""
    options = OptionsMap.from_dict(
        {
            "XnnpackBackend": {
                "workspace_sharing_mode": True,  # the type asked for: not judged
                "save_weight_cache_on_disk": False,  # get_option reads set_option's keys
                "workspace_sharing_modee": 0,
            },
            "XnnpackBakend": {"workspace_sharing_mode": 0},
        }
    )
    found = judge_options(options, Route.GET)
    assert [(w.backend, w.key, w.kind) for w in found] == [
        ("XnnpackBackend", "workspace_sharing_modee", NoEffect.UNKNOWN_KEY),
        ("XnnpackBakend", "", NoEffect.UNKNOWN_BACKEND),
    ]
    assert "get_option has no value of that name to give back" in found[0].text
    assert "its 1 option reaches no backend" in found[1].text


# ---- a backend of one's own ------------------------------------------------------------------

NPU = BackendContract(
    "NpuBackend",
    (
        OptionRule("perf_mode", int, 0, 3),
        OptionRule("cache_dir", str, routes=frozenset({Route.SET})),
    ),
    load=RouteBehaviour("init ignores it", "init ignores it", "init fails"),
    set=None,
)
NPU_FILE = """backend: NpuBackend
options:
  perf_mode: {type: int, low: 0, high: 3}
  cache_dir: {type: string, routes: [set]}
load: {unknown_key: init ignores it, wrong_type: init ignores it, out_of_range: init fails}
set: false
"""


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Contracts declared by the test are forgotten after it."""
    monkeypatch.setattr(option_contracts, "_DECLARED", {})


def test_a_declared_backend_is_judged_as_the_harness_own(declared: None) -> None:
    options = OptionsMap.from_dict(
        {"NpuBackend": {"perf_mode": 7, "perf_mod": 1, "cache_dir": "/x"}, "NpuBakend": {"a": 1}}
    )
    assert judge_options(options, Route.LOAD) == ()  # not known yet: unjudged
    declare_contract(NPU)
    declare_contract(NPU)  # the same again (a conftest imported twice): nothing happens
    assert known_contracts()["NpuBackend"] is NPU
    found = judge_options(options, Route.LOAD)
    assert [(w.key, w.kind) for w in found] == [
        ("perf_mode", NoEffect.OUT_OF_RANGE),
        ("perf_mod", NoEffect.UNKNOWN_KEY),
        ("cache_dir", NoEffect.NOT_READ),
        ("", NoEffect.UNKNOWN_BACKEND),
    ]
    assert "NpuBackend reads an int 0..3; init fails" in found[0].text
    assert "(nearest: perf_mode); init ignores it" in found[1].text
    assert "NpuBakend: no backend has this id (nearest: NpuBackend)" in found[3].text
    (on_set,) = judge_options(OptionsMap.from_dict({"NpuBackend": {"perf_mode": 1}}), Route.SET)
    assert "NpuBackend reads no options through set_option" in on_set.text


def test_a_contract_cannot_take_an_id_the_harness_knows_or_be_declared_twice(
    declared: None,
) -> None:
    mine = BackendContract("XnnpackBackend", (), load=None, set=None)
    with pytest.raises(ContractError, match=r"has the harness's own contract \(pinned by suites/"):
        declare_contract(mine)
    declare_contract(NPU)
    other = BackendContract("NpuBackend", (), load=None, set=None, pinned_by="b.yaml")
    with pytest.raises(ContractError, match=r"a second, different contract \(from b.yaml; the"):
        declare_contract(other)


def test_a_contract_file_declares_the_same_contract(declared: None, tmp_path: Path) -> None:
    folder = tmp_path / "devices"
    (folder / "backends").mkdir(parents=True)
    path = folder / "backends" / "npu.yaml"
    path.write_text(NPU_FILE, encoding="utf-8")
    (contract,) = declare_contract_files([folder, tmp_path / "elsewhere"])
    assert contract == BackendContract(NPU.backend, NPU.options, NPU.load, None, str(path))
    assert known_contracts()["NpuBackend"] is contract
    minimal = tmp_path / "m.yaml"
    minimal.write_text("backend: Mine\noptions:\n  fast: {type: bool}\n", encoding="utf-8")
    (folder / "backends" / "again.yaml").write_text(NPU_FILE, encoding="utf-8")
    assert len(declare_contract_files([folder])) == 2  # the same contract twice: no error
    words = read_contract_file(minimal)
    assert words.load == words.set == RouteBehaviour(*["it will have no effect"] * 3)
    assert words.rule("fast").routes == frozenset({Route.LOAD, Route.SET})
    assert words.rule("fast").effect == OptionEffect()  # result-invariant unless said


def test_a_contract_file_says_what_each_option_may_change(declared: None, tmp_path: Path) -> None:
    """A user's backend's options: numerics within a tolerance, a file when another option
    is on; the effect check judges each by it (the harness's own: packed_cache_path)."""
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "npu.yaml").write_text(
        "backend: NpuBackend\noptions:\n"
        "  fast_math: {type: bool, effect: numerics, tolerance: 0.01}\n"
        "  dump_path: {type: string, effect: file, when: {dump: true}}\n"
        "  dump: {type: bool}\n",
        encoding="utf-8",
    )
    declare_contract_files([tmp_path])
    sent = OptionsMap.from_dict(
        {
            "NpuBackend": {"fast_math": True, "dump_path": "/d", "dump": True},
            "XnnpackBackend": {"packed_cache_path": "/c"},
        }
    )
    file = OptionEffect(Changes.FILE, when=(("dump", True),))
    assert judged_effects(sent) == {
        ("NpuBackend", "fast_math"): OptionEffect(Changes.NUMERICS, 0.01),
        ("NpuBackend", "dump_path"): file,
        ("NpuBackend", "dump"): OptionEffect(),
        ("XnnpackBackend", "packed_cache_path"): OptionEffect(
            Changes.FILE, when=(("weight_cache_enabled", True),)
        ),
    }
    assert file.applies({"dump": True}) and not file.applies({"dump": False})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "a contract file is a mapping of backend, options, load, set; got None"),
        ("backend: X\nmode: 1\n", "unknown field 'mode'; allowed: backend, options, load, set"),
        ("options: {}\n", "backend: the backend id, 1..63 bytes; got None"),
        ("backend: " + "B" * 64 + "\n", "backend: the backend id, 1..63 bytes"),
        ("backend: X\noptions: [a]\n", "options: a mapping of at most 64 keys to their rule"),
        ("backend: X\noptions:\n  k: {type: float}\n", "options.k.type: bool, int or string"),
        ("backend: X\noptions:\n  k: {typ: int}\n", "options.k: unknown field 'typ'"),
        ("backend: X\noptions:\n  k: int\n", "options.k: an option's rule is a mapping"),
        ("backend: X\noptions:\n  5: {type: int}\n", "options.5: a key is a string of 1..63"),
        (
            "backend: X\noptions:\n  k: {type: bool, low: 0}\n",
            "options.k.low: an int bound of an int option; got 0",
        ),
        (
            "backend: X\noptions:\n  k: {type: int, low: 3, high: 1}\n",
            "options.k: low 3 is above high 1: swap them",
        ),
        (
            "backend: X\noptions:\n  k: {type: int, routes: [init]}\n",
            "options.k.routes: a list of load and/or set; got ['init']",
        ),
        ("backend: X\nload: true\n", "load: load (or false) is a mapping of unknown_key"),
        ("backend: X\nset: {unknown_key: 5}\n", "set.unknown_key: a line of at most 200"),
        ("backend: X\nload: {why: x}\n", "load: unknown field 'why'; allowed: unknown_key,"),
        ("backend: X\nbackend: Y\n", "line 2, column 1: key 'backend' appears twice"),
        (
            "backend: X\noptions:\n  k: {type: int, low: 0o7}\n",
            "line 3, column 23: '0o7' is an int only in YAML 1.2",
        ),
        ("backend: XnnpackBackend\n", "backend: XnnpackBackend has the harness's own contract"),
        ("backend: ProbeA\n", "backend: ProbeA has the harness's own contract (pinned by suites/"),
        (
            "backend: X\noptions:\n  k: {type: int, high: 99999999999}\n",
            "options.k.high: within int32 (-2147483648..2147483647), the runtime's int; got 99",
        ),
        (
            "backend: X\noptions:\n  k: {type: int, effect: numerics}\n",
            "options.k.tolerance: a numerics effect has a tolerance",
        ),
        (
            "backend: X\noptions:\n  k: {type: int, effect: file, when: [a]}\n",
            "options.k.when: a mapping of at most 8 keys to values",
        ),
    ],
)
def test_a_bad_contract_file_is_one_line_naming_file_and_field(
    declared: None, tmp_path: Path, text: str, expected: str
) -> None:
    (tmp_path / "backends").mkdir()
    path = tmp_path / "backends" / "c.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ContractFileError) as refused:
        declare_contract_files([tmp_path])
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    assert expected in message, message


def test_contract_files_are_read_within_bounds(declared: None, tmp_path: Path) -> None:
    backends = tmp_path / "backends"
    backends.mkdir()
    big = backends / "big.yaml"
    big.write_text("backend: X\n" + "#" * MAX_FILE_BYTES + "\n", encoding="utf-8")
    with pytest.raises(ContractFileError, match=f"big.yaml: .*limit {MAX_FILE_BYTES}"):
        declare_contract_files([tmp_path])
    big.unlink()
    for index in range(MAX_FILES + 1):
        (backends / f"b{index}.yaml").write_text(f"backend: B{index}\n", encoding="utf-8")
    with pytest.raises(ContractFileError, match=f"65 contract files, limit {MAX_FILES}"):
        declare_contract_files([tmp_path])


def test_a_contract_file_linking_outside_its_folder_is_refused_unread(
    declared: None, tmp_path: Path
) -> None:
    """A shared project's backends/npu.yaml -> a secret of the user's: refused in one line
    that quotes none of it; a link within the device folder is read."""
    secret = tmp_path / "secret.txt"
    secret.write_text("token-0123456789abcdef\n", encoding="utf-8")
    folder = tmp_path / "devices"
    (folder / "backends").mkdir(parents=True)
    (folder / "backends" / "npu.yaml").symlink_to(secret)
    with pytest.raises(ContractFileError) as refused:
        declare_contract_files([folder])
    message = str(refused.value)
    assert "npu.yaml: a symlink to a file outside its device folder" in message, message
    assert "token" not in message and "\n" not in message, message
    (folder / "npu-contract.txt").write_text("backend: NpuBackend\n", encoding="utf-8")
    (folder / "backends" / "npu.yaml").unlink()
    (folder / "backends" / "npu.yaml").symlink_to(folder / "npu-contract.txt")
    (contract,) = declare_contract_files([folder])
    assert contract.backend == "NpuBackend"


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
    assert out.count("warning: ") == 3  # judged once, not once per load
    assert main([*argv, "--device", "host", "--strict-options"]) == 1
    out = capsys.readouterr().out  # refused before anything was loaded
    assert "3 options will have no effect (--strict-options makes that a failure)" in out
    assert "exact" not in out
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


DOORS = """import pytest

from harness.options import load_map
from harness.runner import ModelLoad, xnnpack_program


def test_set(et):
    et.set("typo.yaml").raise_for_differences()


def test_get(et):
    et.get("typo.yaml")


def test_load(et):
    et.load("npu.yaml")


def test_load_models(et):
    et.load_models([ModelLoad(load_map("npu.yaml"))])


def test_check_program(et):
    et.check_program(xnnpack_program(), "npu.yaml")


@pytest.mark.options_without_effect
def test_on_purpose(et):
    et.set("typo.yaml").raise_for_differences()


def test_on_purpose_within_a_block(et):
    with et.unjudged():
        et.set("typo.yaml").raise_for_differences()
    with pytest.raises(Exception, match="1 option will have no effect"):
        et.set("typo.yaml")
"""


def test_every_door_of_the_et_fixture_judges_the_map_the_same_way(tmp_path: Path) -> None:
    """A user's project: its own backend's contract in devices/backends/, maps by path. With
    --strict-options et.set, get, load, load_models and check_program each fail before
    sending; without, the warning is pytest's, at the test's line; a test of options
    without effect on purpose is not judged."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "devices" / "backends").mkdir(parents=True)
    (tmp_path / "devices" / "backends" / "npu.yaml").write_text(NPU_FILE, encoding="utf-8")
    (tmp_path / "typo.yaml").write_text(
        "backends:\n  XnnpackBackend: {workspace_sharing_modee: 1}\n", encoding="utf-8"
    )
    (tmp_path / "npu.yaml").write_text("backends:\n  NpuBackend: {perf_mode: 9}\n", "utf-8")
    (tmp_path / "test_doors.py").write_text(DOORS, encoding="utf-8")
    # -rN: no short summary, whose lines are cut to the terminal's width, but not where CI is
    # set: each failure is counted once, in its section.
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--tb=short",
               "-rN", "--device", "host", "--results-dir", str(tmp_path / "results")]  # fmt: skip

    def run(*extra: str) -> str:
        done = subprocess.run(
            [*command, *extra], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        return f"exit {done.returncode}\n{done.stdout}{done.stderr}"

    strict = run("--strict-options")
    assert strict.startswith("exit 1") and "5 failed, 2 passed" in strict, strict
    assert strict.count("OptionsWithoutEffect: 1 option will have no effect") == 5, strict
    misspelled = "- XnnpackBackend: option workspace_sharing_modee (int 1): not an option"
    assert strict.count(misspelled) == 2, strict  # set, get
    assert strict.count("- NpuBackend: option perf_mode (int 9): NpuBackend reads an") == 3
    lenient = run("-k", "test_set or test_on_purpose and not block")
    assert lenient.startswith("exit 0") and "2 passed" in lenient, lenient
    summary = lenient.split("warnings summary", 1)[1]
    assert summary.count("NoEffectWarning") == 1, lenient
    assert "test_doors.py:8: NoEffectWarning: XnnpackBackend: option workspace_sharing_modee" in (
        summary
    )
