"""The host agent under valgrind's memcheck (``devices/host-memcheck.yaml``) catches a read
of freed memory whatever the memory layout makes of it.

``tests/faults/etb_dangling_shim.cpp``, preloaded into the host agent, reads a freed block
and branches on a byte it never wrote in every ``Program::load_method``: under memcheck a
suite's tests that LOAD fail with the report's top frames (the read, where the block was
freed; the branch in the kept report), while a test that never loads passes (the clean
agent: tests/system/test_race_detector.py). A small program stands for commits of a history that
carry a dangling read: built plainly, one layout prints the right number and another a
wrong one; under memcheck (the launcher the profile uses) every commit that has the read
is reported, and the one without is not.
Nightly, on ExecuTorch's own history: a dangling read planted in the runtime's
``Program::load_method`` passes on plain host, and ``et-harness bisect --device
host-memcheck`` names the commit that planted it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prerequisites import require
from test_race_detector import LOADS, NO_LOAD, compile_shim, run_under
from test_source_history import LIFETIME, History, clone_history, git, needs_bundle

from harness.profiles.device_profile import load_profile
from harness.runtime.race_detector import RaceDetector, RaceLog, RaceReported
from harness.runtime.race_reports import parse_valgrind_xml

ROOT = Path(__file__).resolve().parents[2]
SHIM_SOURCE = ROOT / "tests" / "faults" / "etb_dangling_shim.cpp"

# A weight table freed too early, then read: whether the read sees the weights depends on
# whether the allocator gave the freed block to the next allocation (same size) or not.
DANGLING_C = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static float *make_scales(void) {
  float *scales = malloc(16 * sizeof(float));
  for (int i = 0; i < 16; i++) scales[i] = 0.30246f;
  return scales;
}
int main(void) {
  float *scales = make_scales();
#ifdef EARLY_FREE
  free(scales);
#endif
  float *other = malloc(OTHER);
  for (unsigned i = 0; i < OTHER / sizeof(float); i++) other[i] = -3.9e-32f;
  printf("%g\n", scales[8]);
  free(other);
  return 0;
}
"""
# (commit, its build flags, what the plain build prints)
COMMITS = [
    ("good", ["-DOTHER=64"], "0.30246"),
    ("frees-early", ["-DEARLY_FREE", "-DOTHER=128"], "0.30246"),  # the layout hides it
    ("unrelated", ["-DEARLY_FREE", "-DOTHER=64"], "-3.9e-32"),  # the layout shows it
]


def test_the_shipped_memcheck_profile_runs_the_agent_under_memcheck() -> None:
    profile = load_profile("host-memcheck")
    assert profile.agent.race_detector is RaceDetector.MEMCHECK
    assert "memory-checker" in profile.tags
    argv, env = RaceLog(RaceDetector.MEMCHECK, Path("/tmp/logs"), ()).launch()
    assert argv[1:3] == ("--tool=memcheck", "--xml=yes") and "--leak-check=no" in argv
    assert not env


def test_a_memcheck_report_fails_the_test_with_its_top_frames(tmp_path: Path) -> None:
    """The report's kind, the read, where the block was freed and allocated, in the message."""
    (tmp_path / "memcheck.7.xml").write_text(INVALID_READ_XML)
    check = RaceLog(RaceDetector.MEMCHECK, tmp_path, ()).take()
    (finding,) = check.findings
    assert finding.report.kind == "InvalidRead"
    with pytest.raises(RaceReported) as raised:
        check.raise_for_findings("artifacts/x/memcheck-report.txt")
    message = str(raised.value)
    assert message.startswith("memcheck reported 1 memory error report(s) that no entry")
    lines = message.splitlines()
    assert lines[1:4] == [
        "Invalid read of size 4",
        "    main (dangling.c:18)",
        "  Address 0x4a42060 is 32 bytes inside a block of size 64 free'd",
    ]
    assert "    make_scales (dangling.c:7)" in lines


INVALID_READ_XML = """<?xml version="1.0"?>
<valgrindoutput><protocolversion>4</protocolversion><protocoltool>memcheck</protocoltool>
<error>
  <unique>0x0</unique><tid>1</tid><kind>InvalidRead</kind>
  <what>Invalid read of size 4</what>
  <stack><frame><ip>0x1091CB</ip><obj>/tmp/d</obj><fn>main</fn><dir>/tmp</dir>
  <file>dangling.c</file><line>18</line></frame></stack>
  <auxwhat>Address 0x4a42060 is 32 bytes inside a block of size 64 free'd</auxwhat>
  <stack><frame><ip>0x484417B</ip><obj>/usr/libexec/valgrind/vgpreload_memcheck.so</obj>
  <fn>free</fn></frame><frame><ip>0x10919D</ip><obj>/tmp/d</obj><fn>main</fn><dir>/tmp</dir>
  <file>dangling.c</file><line>14</line></frame></stack>
  <auxwhat>Block was alloc'd at</auxwhat>
  <stack><frame><ip>0x48417B4</ip><obj>/usr/libexec/valgrind/vgpreload_memcheck.so</obj>
  <fn>malloc</fn></frame><frame><ip>0x109166</ip><obj>/tmp/d</obj><fn>make_scales</fn>
  <dir>/tmp</dir><file>dangling.c</file><line>7</line></frame></stack>
</error>
"""


def test_memcheck_xml_is_read_like_the_race_detectors() -> None:
    (report,) = parse_valgrind_xml("memcheck", INVALID_READ_XML)
    assert [frame.function for frame in report.frames] == [
        "main", "free", "main", "malloc", "make_scales"
    ]  # fmt: skip
    assert report.memory[0].endswith("block of size 64 free'd")


@pytest.mark.slow
def test_every_commit_with_the_dangling_read_is_reported_whatever_it_prints(
    tmp_path: Path,
) -> None:
    """Plainly built, the commit that frees early prints the right number (its layout hides
    the read) and a later unrelated one a wrong one; memcheck reports both, not the good one."""
    require("gcc")
    require("valgrind")
    source = tmp_path / "dangling.c"
    source.write_text(DANGLING_C)
    for commit, flags, prints in COMMITS:
        binary = tmp_path / commit
        subprocess.run(
            ["gcc", "-O1", "-g", *flags, str(source), "-o", str(binary)],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        plain = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
        assert plain.stdout.strip() == prints, commit
        logs = tmp_path / f"{commit}-logs"
        logs.mkdir()
        log = RaceLog(RaceDetector.MEMCHECK, logs, ())
        argv, _ = log.launch()
        subprocess.run([*argv, str(binary)], capture_output=True, timeout=120, check=True)
        kinds = [finding.report.kind for finding in log.take().unsuppressed]
        assert kinds == ([] if commit == "good" else ["InvalidRead"]), commit


@pytest.fixture(scope="module")
def dangling_shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shim = tmp_path_factory.mktemp("dangling_shim") / "libetb_dangling_shim.so"
    return compile_shim(SHIM_SOURCE, shim)


@pytest.mark.slow
def test_memcheck_flags_the_dangling_read_in_the_test_that_ran_into_it(
    dangling_shim: Path, tmp_path: Path
) -> None:
    require("valgrind")
    run = run_under("memcheck", tmp_path, dangling_shim)
    assert len(run.results) == 5, run.output
    assert run.outcomes(LOADS) == {"failed"}, run.output
    assert run.outcomes(NO_LOAD) == {"passed"}, run.output
    failed = run.result(LOADS)
    assert "memcheck reported 2 memory error report(s)" in failed.longrepr, failed.longrepr
    assert "Invalid read of size 1" in failed.longrepr  # the first, with its top frames
    assert "read_after_free" in failed.longrepr and "etb_dangling_shim.cpp:" in failed.longrepr
    (artifact,) = failed.artifacts
    assert artifact.endswith("/try-1/memcheck-report.txt")
    kept = (run.results_dir / artifact).read_text()
    assert kept.count("NOT SUPPRESSED") == 2
    assert "<kind>UninitCondition</kind>" in kept and "branch_on_uninitialised" in kept


PLANTED_READ = """  {  // planted: a read of freed memory
    char* copy = static_cast<char*>(std::malloc(8));
    if (copy != nullptr) {
      copy[0] = method_name[0];
      char* volatile stale = copy;
      std::free(copy);
      volatile char seen = stale[0];
      (void)seen;
    }
  }
"""


def plant_dangling_read(history: History, tmp_path: Path) -> tuple[Path, str]:
    """A clone of the history with three commits on its tip: a dangling read in
    Program::load_method (its value unused: nothing a test compares changes), then two
    unrelated ones."""
    tree = tmp_path / "planted"
    subprocess.run(["git", "clone", "-q", str(history.path), str(tree)], check=True, timeout=60)
    git(tree, "config", "user.email", "harness@example.invalid")
    git(tree, "config", "user.name", "harness test")
    program = tree / "runtime/executor/program.cpp"
    anchor = '  EXECUTORCH_SCOPE_PROF("Program::load_method");\n'
    text = program.read_text("utf-8")
    assert text.count(anchor) == 1, "the planted read's anchor is gone"
    text = text.replace(anchor, anchor + PLANTED_READ).replace(
        "#include <cstddef>\n", "#include <cstddef>\n#include <cstdlib>\n", 1
    )
    program.write_text(text, "utf-8")
    git(tree, "commit", "-q", "-am", "planted: Program::load_method reads freed memory")
    planted = git(tree, "rev-parse", "HEAD")
    for file in ("runtime/platform/log.cpp", "runtime/core/evalue.cpp"):
        with (tree / file).open("a", encoding="utf-8") as source:
            source.write("// An unrelated change.\n")
        git(tree, "commit", "-q", "-am", f"planted: an unrelated comment in {file}")
    return tree, planted


def bisect_on(tree: Path, device: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "bisect", str(tree), "--good", "HEAD~3",
         "--bad", "HEAD", "--device", device, "--json", str(out), "--", LIFETIME],
        cwd=ROOT, env={**os.environ, "ET_HARNESS_HISTORY": "off"}, capture_output=True,
        text=True, timeout=1800, check=False,
    )  # fmt: skip


@needs_bundle
@pytest.mark.nightly
def test_bisect_on_the_memcheck_device_names_a_dangling_read_plain_host_cannot_see(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    require("valgrind")
    tree, planted = plant_dangling_read(clone_history(tmp_path_factory), tmp_path)
    plain = bisect_on(tree, "host", tmp_path / "plain.json")
    assert plain.returncode == 2, plain.stdout[-3000:] + plain.stderr[-3000:]
    assert "HEAD is good, not bad (3 passed)" in plain.stderr  # the layout hides it
    checked = bisect_on(tree, "host-memcheck", tmp_path / "memcheck.json")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    result = json.loads((tmp_path / "memcheck.json").read_text("utf-8"))
    assert result["found"]["hash"] == planted and not result["cannot_tell"]
    assert "memcheck reported 1 memory error report(s)" in result["difference"]
    assert (
        "Invalid read of size 1 at executorch::runtime::Program::load_method (program.cpp:"
        in (result["difference"])
    )
    # Every planted commit (the two unrelated ones too) that ran failed with the read.
    bad = [s for s in result["steps"] if s["outcome"] == "bad"]
    assert {s["commit"] for s in bad} >= {planted, git(tree, "rev-parse", "HEAD")}
    assert all("Invalid read of size 1" in s["why"] for s in bad)
