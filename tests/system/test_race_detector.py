"""Race detectors on the host agent (harness/runtime/race_detector.py) catch races, and only races.

``tests/faults/etb_race_shim.cpp``, preloaded into the host agent, races two
threads on one int in every ``Program::load_method``. Under each detector (tsan:
the agent's ThreadSanitizer build and the shim built with -fsanitize=thread;
helgrind and drd: both plain, under valgrind) a suite's tests that LOAD must fail
with the detector's report, kept as the test's artifact, while a test that never
loads passes; without the shim (the clean agent) every test passes. The
profile field is checked like every other, and a detector that cannot run is an
infrastructure error, not a pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from prerequisites import require

from harness.profiles.device_profile import ProfileError, parse_profile
from harness.results.directory import RESULTS_FILE, read_results
from harness.results.infra import infrastructure_error
from harness.results.records import CaseResult
from harness.runtime.race_detector import DetectorBroke, RaceDetector, RaceLog
from harness.runtime.race_reports import (
    Suppression,
    SuppressionFileError,
    classify,
    load_suppressions,
    parse_tsan,
    parse_valgrind_xml,
)
from harness.runtime.wheel_sdk import ensure_sdk, host_abi
from harness.untrusted.trust import TRUSTED_PROFILES_ENV

ROOT = Path(__file__).resolve().parents[2]
SHIM_SOURCE = ROOT / "tests" / "faults" / "etb_race_shim.cpp"
# A test that loads a program (and so runs into the shim's race), and one (on each of the
# four load paths) that never does.
LOADS = "test_explicit_empty_map_delivers_nothing"
NO_LOAD = "test_keep_without_a_loaded_program_is_invalid_state"
SELECTION = f"{LOADS} or {NO_LOAD}"
RUN_TIMEOUT_S = 600
RACE_DETECTORS = [d.value for d in RaceDetector if d.finds == "race"]  # memcheck: test_memcheck.py


# ---- the profile field --------------------------------------------------------------------


def _profile(
    agent: dict[str, object], transport: str = "local", **top: object
) -> dict[str, object]:
    kind: dict[str, object] = {"kind": transport}
    if transport == "ssh":
        kind.update(host="board", user="ci")
    return {"transport": kind, "agent": agent, **top}


@pytest.mark.parametrize("detector", [d.value for d in RaceDetector])
def test_profile_picks_a_detector_from_the_fixed_set(detector: str) -> None:
    profile = parse_profile(_profile({"race_detector": detector}), Path("devices/x.yaml"))
    assert profile.agent.race_detector is RaceDetector(detector)


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        (_profile({"race_detector": "valgrind --tool=memcheck"}),
         ("devices/x.yaml: agent.race_detector: 'valgrind --tool=memcheck' is not one of "
          "tsan, helgrind, drd, memcheck; pick one or remove the field")),
        (_profile({"race_detector": ["tsan"]}), "agent.race_detector: ['tsan'] is not one of"),
        (_profile({"race_detector": "tsan"}, transport="ssh"),
         "agent.race_detector: tsan runs only on the local host device"),
        (_profile({"race_detector": "helgrind"}, transport="ssh", emulator="ssh-emu"),
         "not on ssh emulator ssh-emu; remove the field"),
        (_profile({"race_detector": "tsan", "prebuilt": "/opt/agent"}),
         ("agent.race_detector: tsan runs the harness's own thread-sanitized build, not "
          "agent.prebuilt")),
    ],
    ids=["command", "list", "ssh", "emulated", "tsan-prebuilt"],
)  # fmt: skip
def test_profile_refuses_other_detectors_and_devices(
    profile: dict, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, "devices/x.yaml")  # prebuilt is a trusted field
    with pytest.raises(ProfileError) as raised:
        parse_profile(profile, Path("devices/x.yaml"))
    message = str(raised.value)
    assert says in message and "\n" not in message


# ---- reading reports ----------------------------------------------------------------------

TSAN_OUTPUT = """\
==================
WARNING: ThreadSanitizer: data race (pid=42)
  Write of size 4 at 0x7f0 by thread T1:
    #0 bump /src/shim.cpp:12 (libshim.so+0x1249)
    #1 std::thread::_M_start_thread(std::unique_ptr<std::thread::_State>, void (*)()) <null> \
(libstdc++.so.6+0xd4578)

  Previous write of size 4 at 0x7f0 by main thread:
    #0 bump /src/shim.cpp:12 (libshim.so+0x1249) (BuildId: 70e0ce9a)

SUMMARY: ThreadSanitizer: data race /src/shim.cpp:12 in bump
==================
==================
WARNING: ThreadSanitizer: thread leak (pid=42)
"""

VALGRIND_XML = """<?xml version="1.0"?>
<valgrindoutput><protocolversion>4</protocolversion>
<error>
  <unique>0x0</unique><tid>1</tid><kind>Race</kind>
  <xwhat><text>Possible data race during read of size 4 at 0x10C054 by thread #1</text></xwhat>
  <stack><frame><ip>0x1</ip><obj>/opt/lib/libxnnpack.so</obj><fn>xnn_init</fn>
  <dir>/src</dir><file>init.c</file><line>7</line></frame></stack>
  <xauxwhat><text>This conflicts with a previous write of size 4 by thread #2</text></xauxwhat>
</error>
<error>
  <unique>0x1</unique><tid>1</tid><kind>Race</kind>
"""


def test_tsan_reports_are_read_with_their_frames_and_an_unfinished_one_waits() -> None:
    (report,) = parse_tsan(TSAN_OUTPUT)  # the thread leak has no closing rule yet
    assert (report.tool, report.kind) == ("tsan", "data race")
    assert report.frames[0].function == "bump" and report.frames[0].object == "libshim.so"
    assert report.frames[0].location == "/src/shim.cpp:12"
    assert report.frames[1].function.startswith("std::thread::_M_start_thread(")
    assert report.first_lines(2).splitlines()[1].startswith("  Write of size 4")


def test_valgrind_xml_reports_are_read_and_an_unfinished_error_waits() -> None:
    (report,) = parse_valgrind_xml("helgrind", VALGRIND_XML)
    assert (report.kind, report.frames[0].function) == ("Race", "xnn_init")
    assert report.headline.startswith("Possible data race during read")
    assert "xnn_init (init.c:7)" in report.text and "conflicts with" in report.text


def _race_log(
    tmp_path: Path, detector: RaceDetector, files: dict[str, str], suppressions: str | None = None
) -> RaceLog:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    rules: tuple[Suppression, ...] = ()
    if suppressions is not None:
        path = tmp_path.parent / f"{tmp_path.name}-suppressions.yaml"
        path.write_text(suppressions)
        rules = load_suppressions(path)
    return RaceLog(detector, tmp_path, rules)


def test_a_take_reads_only_what_is_new_and_finished(tmp_path: Path) -> None:
    log = _race_log(tmp_path, RaceDetector.TSAN, {"tsan.42": TSAN_OUTPUT})
    first = log.take()
    assert [f.report.kind for f in first.findings] == ["data race"]
    with (tmp_path / "tsan.42").open("a") as more:  # the leak report is finished now
        more.write("  Thread T1 (tid=7, finished) created by main thread at:\n==================\n")
    second = log.take()
    assert [f.report.kind for f in second.findings] == ["thread leak"]
    assert not log.take().output


SUPPRESSIONS = """\
suppressions:
  - id: xnnpack-init
    tools: [helgrind]
    kind: Race
    object: "libxnnpack*.so"
    why: a known race in the prebuilt runtime
    reference: https://github.com/pytorch/executorch/issues/0
"""


def test_a_suppression_explains_a_matching_report_and_says_why(tmp_path: Path) -> None:
    log = _race_log(tmp_path, RaceDetector.HELGRIND, {"helgrind.7.xml": VALGRIND_XML}, SUPPRESSIONS)
    check = log.take()
    (finding,) = check.findings
    assert finding.suppressed_by is not None and finding.suppressed_by.id == "xnnpack-init"
    assert not check.unsuppressed
    check.raise_for_findings()  # explained: the test passes
    assert "suppressed by xnnpack-init: a known race in the prebuilt runtime" in (
        check.artifact_text()
    )
    other = _race_log(tmp_path / "drd", RaceDetector.DRD, {}, SUPPRESSIONS)
    assert other.suppressions[0].tools == ("helgrind",)  # a drd report is not explained


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("  - {id: a, tools: [tsan], function: f}", "suppressions[0].why: required"),
        ("  - {id: a, tools: [tsan], why: ' '}", "suppressions[0].why: required"),
        ("  - {id: a, tools: [asan], function: f, why: w}", "suppressions[0].tools:"),
        ("  - {id: a, tools: [tsan], why: w}", "give 'function' or 'object'"),
        ("  - {id: a, tools: [tsan], function: f, why: w, run: x}", "suppressions[0].run: unknown"),
        (
            "  - {id: a, tools: [tsan], function: '*', why: w}",
            "suppressions[0].function: '.' matches any access",
        ),
        (
            "  - {id: a, tools: [drd], function: '**', object: '?*', why: w, via: f}",
            "suppressions[0].function: '..' matches any access, so the entry would explain every",
        ),
        ("  - {id: a, tools: [tsan], object: '*', why: w}", "suppressions[0].object: '.' matches"),
    ],
    ids=[
        "no-why",
        "blank-why",
        "tool",
        "no-pattern",
        "unknown-field",
        "function-any",
        "both-any",
        "object-any",
    ],
)
def test_suppression_entries_must_say_why_and_what(tmp_path: Path, entry: str, says: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"suppressions:\n{entry}\n")
    with pytest.raises(SuppressionFileError, match=rf"^{path}: .*{says}".replace("[", r"\[")):
        load_suppressions(path)


def test_the_checked_in_suppressions_load() -> None:
    for rule in load_suppressions():
        assert rule.why and rule.tools


# drd's report of get_threadpool() reading its static pointer, as it came in a CI run: both
# other-segment stacks empty, so only the access and the memory say what it is.
DRD_STATIC_POINTER = """<error>
  <unique>0x2de</unique><tid>2</tid><kind>ConflictingAccess</kind>
  <what>Conflicting load by thread 2 at 0x048ab4a8 size 8</what>
  <stack>
    <frame><ip>0x48A04BE</ip><obj>/w/agent/libexecutorch_threadpool.so</obj>
    <fn>executorch::extension::threadpool::get_threadpool()</fn></frame>
    <frame><ip>0x48A0681</ip><obj>/w/agent/libexecutorch_threadpool.so</obj>
    <fn>executorch::extension::threadpool::get_pthreadpool()</fn></frame>
  </stack>
  <auxwhat>Allocation context: {memory}</auxwhat>
  <other_segment_start>
  </other_segment_start>
  <other_segment_end>
  </other_segment_end>
</error>
"""


@pytest.mark.parametrize(
    ("memory", "explained_by"),
    [
        ("BSS section of /w/agent/libexecutorch_threadpool.so", "threadpool-static-pointer"),
        ("BSS section of /w/agent/et-agent", None),  # another object's statics: not this
        ("unknown", None),  # heap memory without the writer's stack: nothing to go on
    ],
    ids=["its-own-static", "other-bss", "unknown-memory"],
)
def test_the_threadpool_static_is_explained_by_its_memory_only(
    memory: str, explained_by: str | None
) -> None:
    (report,) = parse_valgrind_xml("drd", DRD_STATIC_POINTER.format(memory=memory))
    assert report.memory == (f"Allocation context: {memory}",)
    (finding,) = classify([report], load_suppressions())
    assert (finding.suppressed_by and finding.suppressed_by.id) == explained_by


def test_a_detector_that_failed_is_an_infrastructure_error(tmp_path: Path) -> None:
    fatal = "FATAL: ThreadSanitizer: unexpected memory mapping 0x7b0000000000-0x7b0000001000\n"
    check = _race_log(tmp_path, RaceDetector.TSAN, {"tsan.9": fatal}).take()
    with pytest.raises(DetectorBroke) as raised:
        check.raise_for_findings()
    assert "unexpected memory mapping" in str(raised.value)
    assert infrastructure_error(raised.value) is raised.value


# ---- the detectors on the host agent, with and without the racy shim ----------------------


def compile_shim(source: Path, shim: Path, *flags: str) -> Path:
    """``source`` (a shim of tests/faults/) as a library to preload into the host agent,
    compiled against the wheel's headers with the definitions its libraries were built with."""
    require("g++")
    sdk = ensure_sdk(host_abi())
    subprocess.run(
        ["g++", "-std=c++17", "-O1", "-g", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra",
         "-Werror", "-Wno-unused-parameter", *flags,
         "-DC10_USING_CUSTOM_GENERATED_MACROS", "-DET_EVENT_TRACER_ENABLED",
         "-DET_USE_THREADPOOL", f"-I{sdk.include}",
         f"-I{sdk.include / 'executorch/runtime/core/portable_type/c10'}",
         str(source), "-o", str(shim), "-ldl"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return shim


@pytest.fixture(scope="module")
def race_shims(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The racy shim, for the TSAN build (instrumented) and for valgrind (plain)."""
    out = tmp_path_factory.mktemp("race_shim")
    return {
        variant: compile_shim(SHIM_SOURCE, out / f"libetb_race_shim_{variant}.so", *flags)
        for variant, flags in (("tsan", ["-fsanitize=thread"]), ("plain", []))
    }


@dataclass(frozen=True)
class DetectorRun:
    results: tuple[CaseResult, ...]
    results_dir: Path
    output: str

    def outcomes(self, test: str) -> set[str]:
        return {r.outcome for r in self.results if r.name.startswith(test)}

    def result(self, test: str) -> CaseResult:
        (result,) = [r for r in self.results if r.name.startswith(test)]
        return result


def run_under(detector: str, base: Path, shim: Path | None, path: str | None = None) -> DetectorRun:
    """suites/test_load_paths.py's selected tests on a host profile under ``detector``."""
    work = base / f"{detector}-{'racy' if shim else 'clean'}{'-nopath' if path else ''}"
    work.mkdir()
    profile = work / "host-race.yaml"
    env = f"  env: {{LD_PRELOAD: '{shim}'}}\n" if shim else ""
    profile.write_text(
        f"transport:\n  kind: local\nwork_dir: {work / 'device'}\nbackends: [XnnpackBackend]\n"
        f"timeouts:\n  case: 300\nagent:\n  race_detector: {detector}\n{env}",
        encoding="utf-8",
    )
    results_dir = work / "results"
    environment = {**os.environ, TRUSTED_PROFILES_ENV: str(profile)}  # its agent.env runs here
    if path is not None:
        environment["PATH"] = path
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/test_load_paths.py", "-k", SELECTION,
         "--device", str(profile), "-q", "-p", "no:cacheprovider", "--results-dir",
         str(results_dir), "--lock-dir", str(work / "locks"), "--infra-retries", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=environment,
        check=False,
    )  # fmt: skip
    results = tuple(read_results(results_dir / RESULTS_FILE))
    return DetectorRun(results, results_dir, done.stdout[-6000:] + done.stderr[-2000:])


_HEADLINE = {
    "tsan": "WARNING: ThreadSanitizer: data race",
    "helgrind": "Possible data race",
    "drd": "Conflicting",
}


@pytest.mark.slow
@pytest.mark.parametrize("detector", RACE_DETECTORS)
def test_the_detector_flags_the_racy_shim_in_the_test_that_ran_into_it(
    detector: str, race_shims: dict[str, Path], tmp_path: Path
) -> None:
    if detector != "tsan":
        require("valgrind")
    shim = race_shims["tsan" if detector == "tsan" else "plain"]
    run = run_under(detector, tmp_path, shim)
    assert len(run.results) == 5, run.output
    assert run.outcomes(LOADS) == {"failed"}, run.output
    assert run.outcomes(NO_LOAD) == {"passed"}, run.output
    failed = run.result(LOADS)
    assert f"{detector} reported" in failed.longrepr and _HEADLINE[detector] in failed.longrepr
    assert "etb_race_shim.cpp:" in failed.longrepr  # the racing line, in the message
    (artifact,) = failed.artifacts
    assert artifact.endswith(f"/try-1/{detector}-report.txt")
    kept = (run.results_dir / artifact).read_text()
    assert "NOT SUPPRESSED" in kept and "etb_race_shim.cpp" in kept


@pytest.mark.slow
@pytest.mark.parametrize("detector", [d.value for d in RaceDetector])
def test_the_clean_agent_is_not_flagged(detector: str, tmp_path: Path) -> None:
    if detector != "tsan":
        require("valgrind")
    run = run_under(detector, tmp_path, None)
    assert len(run.results) == 5, run.output
    assert {r.outcome for r in run.results} == {"passed"}, run.output


def test_a_detector_that_cannot_run_is_an_infrastructure_error(tmp_path: Path) -> None:
    """valgrind missing (the compilers there): the device fails when it is opened."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("g++", "make"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    run = run_under("helgrind", tmp_path, None, path=str(tools))
    assert {r.outcome for r in run.results} == {"infra"}, run.output
    infra = run.results[0].infra
    assert infra is not None and infra.type == "MissingHostTool", run.output
    assert infra.message == (
        "host-race: valgrind (runs the agent under helgrind, drd or memcheck) is not on PATH; "
        "install Debian's valgrind (apt-get install valgrind)"
    )
