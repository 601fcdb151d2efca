"""``et-harness bisect`` cannot be fooled by a second, layout-dependent bug in its range.

A small git repository stands for a source tree: a planted bug (``bug``, from which
``test_a`` fails) and, earlier in the same range, a commit whose other test (``test_b``,
run first, so ``-x`` stops on it) fails only on some runs, or only on some builds, as a
read of freed memory does when the memory layout shows it. Each step's tests are played
from the files at that commit (the build of a runtime per commit is what
tests/system/test_source_history.py covers); everything else is the command as a user runs it:
the range from git, the search, the result lines, the JSON and the exit code. Bisect
names the planted commit or says it cannot tell (exit 1); it never names another with
exit 0, as it did before it confirmed its boundary.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from harness.cli import bisect
from harness.cli.bisect_search import BAD, GOOD, Step
from harness.cli.main import main
from harness.history.bisect_results import bisect_line, kept_bisects

LIMITS = "suites/test_limits.py"
TEST_A = f"{LIMITS}::test_a[host]"  # fails from the planted bug on
TEST_B = f"{LIMITS}::test_b[host]"  # fails where the layout shows the dangling read


def git(tree: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), *args], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def planted(tmp_path: Path, layouts: dict[int, str], fixed: bool = False) -> tuple[Path, list[str]]:
    """Nine commits: 0 the good end, 6 the planted bug (``fixed``: 0 the bad end, 6 the
    fix), each in ``layouts`` a build whose layout shows the dangling read (``always``, or
    ``first-run`` of each build only)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    git(tree, "init", "-q", "-b", "main")
    git(tree, "config", "user.email", "harness@example.invalid")
    git(tree, "config", "user.name", "harness test")
    made = []
    for index in range(9):
        (tree / "bug").write_text("1" if (index >= 6) != fixed else "0")
        (tree / "layout").write_text(layouts.get(index, "hidden"))
        (tree / "version").write_text(str(index))
        change = "fixes" if fixed else "drops"
        subject = f"commit {index}"
        if index == 6:
            subject = f"planted: {change} each backend's last option"
        git(tree, "add", "-A")
        git(tree, "commit", "-q", "-m", subject)
        made.append(git(tree, "rev-parse", "HEAD"))
    return tree, made


@pytest.fixture
def played(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Counter[str]:
    """Each step's tests played from the commit's files; the runs of each commit counted."""
    runs: Counter[str] = Counter()

    def run_step(tree: Path, commit: str | None, device: str, selection: list[str]) -> Step:
        assert commit is not None
        runs[commit] += 1
        layout = git(tree, "show", f"{commit}:layout")
        shows = layout == "always" or (layout == "first-run" and runs[commit] == 1)
        if shows and not any(s.endswith("test_a[host]") for s in selection):
            return Step(commit, BAD, f"{TEST_B}: wrong output [0] -3.9e-32", 1.0, TEST_B)
        if git(tree, "show", f"{commit}:bug") == "1":
            return Step(commit, BAD, f"{TEST_A}: ProbeA MISSING threads", 1.0, TEST_A)
        return Step(commit, GOOD, "2 passed", 1.0)

    monkeypatch.setattr(bisect, "run_step", run_step)
    monkeypatch.setattr(bisect, "check_selection", lambda device, selection: None)
    monkeypatch.setattr("harness.runtime.source_tree.check_source", lambda tree, rev: None)
    monkeypatch.setenv("ET_HARNESS_DATA", str(tmp_path / "data"))
    return runs


def run(tree: Path, good: str, tmp_path: Path, *tests: str) -> tuple[int, dict]:
    out = tmp_path / "bisect.json"
    code = main(["bisect", str(tree), "--good", good, "--bad", "main", "--json", str(out),
                 "--", *(tests or (LIMITS,))])  # fmt: skip
    return code, json.loads(out.read_text("utf-8"))


def test_the_planted_commit_is_named_once_it_and_its_parent_ran_again(
    played: Counter[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, commits = planted(tmp_path, {})
    code, result = run(tree, commits[0], tmp_path)
    assert code == 0, capsys.readouterr().out
    assert result["found"]["hash"] == commits[6] and not result["cannot_tell"]
    assert played[commits[6]] == 3 and played[commits[5]] == 3  # --confirm 2: two more each
    shown = capsys.readouterr().out
    assert f"first bad commit: {commits[6][:12]} planted: drops" in shown
    assert "(confirmed: it and the one before it ran 3 times each)" in shown


def test_a_build_whose_layout_shows_another_test_failing_is_not_named(
    played: Counter[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Commit 5's layout shows the dangling read (test_b fails there on every run, not at 4
    or 8): the boundary 4..5 holds, but its failing test is not the bad end's: cannot tell,
    and the bad end's test alone then finds the planted commit."""
    tree, commits = planted(tmp_path, {3: "always", 5: "always"})
    code, result = run(tree, commits[0], tmp_path)
    shown = capsys.readouterr().out
    assert code == 1, shown
    (said,) = result["cannot_tell"]
    assert said == (
        f"the failing test at {commits[5][:12]} ({TEST_B}) is not the one that failed at the "
        f"bad end {commits[8][:12]} ({TEST_A}): the range may hold another fault; bisect that "
        f"test alone (-- {TEST_A})"
    )
    assert shown.splitlines()[-4].startswith(f"cannot tell the first bad commit: {said[:40]}")
    (kept,) = kept_bisects()  # et-harness history shows it beside the failure: not as sure
    assert f": cannot tell; the search stopped at {commits[5][:12]} commit 5;" in bisect_line(kept)
    again, result = run(tree, commits[0], tmp_path, TEST_A)
    assert again == 0 and result["found"]["hash"] == commits[6]


def test_a_commit_that_fails_only_on_some_runs_is_never_named(
    played: Counter[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From commit 3 on, test_b fails on a build's first run only (it varies between runs):
    one run each would name commit 3 with exit 0. Re-runs show 3, 4 and 5 flaky; 6 holds."""
    tree, commits = planted(tmp_path, dict.fromkeys(range(3, 9), "first-run"))
    code, result = run(tree, commits[0], tmp_path)
    shown = capsys.readouterr().out
    assert code == 1, shown
    assert result["found"]["hash"] == commits[6]
    assert [c["hash"] for c in result["undecided_among"]] == commits[3:6]
    assert result["cannot_tell"][0].startswith(
        f"3 commit(s) before it gave different outcomes on re-runs ({commits[3][:12]}, "
    )
    assert (
        f"first bad commit is one of these (the others could not be told): {commits[3][:12]}"
        in (shown)
    )
    assert max(played.values()) <= 3  # 1 + --confirm runs of any commit at most


def test_a_good_end_that_fails_on_a_run_again_is_cannot_tell(
    played: Counter[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--good names commit 5, whose test_b fails on its first run: bisection alone never
    runs the good end; the confirmation does, and does not name commit 6 as sure."""
    tree, commits = planted(tmp_path, {5: "first-run"})
    code, result = run(tree, commits[5], tmp_path)
    shown = capsys.readouterr().out
    assert code == 1, shown
    assert result["cannot_tell"] == [
        f"the old end {commits[5][:12]} did not come out good on each of 1 run(s) (bad: "
        f"{TEST_B}: wrong output [0] -3.9e-32)"
    ]
    assert f"where the search stopped: {commits[6][:12]} planted" in shown


def test_a_checkers_failure_is_told_by_its_report_not_by_pytests_last_line() -> None:
    """A step failed by memcheck: its difference is the report's headline and innermost
    frame, not "All traceback entries are hidden" (the failure hides its traceback)."""
    longrepr = (
        "E   harness.runtime.race_detector.RaceReported: memcheck reported 1 memory error "
        "report(s) that no entry of agent/runtime/race-suppressions.yaml explains; the full "
        "report: /r/memcheck-report.txt; the first:\n"
        "    Invalid read of size 1\n"
        "        executorch::runtime::Program::load_method(char const*, "
        "executorch::runtime::MemoryManager*) const (program.cpp:384)\n"
        "        executorch::extension::module::Module::load_method() (module.cpp:534)\n"
        "All traceback entries are hidden. Pass `--full-trace` to see hidden and internal frames."
    )
    record = {"nodeid": TEST_A, "outcome": "failed", "longrepr": longrepr}
    assert bisect.classify([record], 1, "") == (
        BAD,
        f"{TEST_A}: memcheck reported 1 memory error report(s) that no entry of "
        "agent/runtime/race-suppressions.yaml explains: Invalid read of size 1 at "
        "executorch::runtime::Program::load_method (program.cpp:384)",
    )
    plain = {"nodeid": TEST_A, "outcome": "failed", "longrepr": "x\nE   assert 3 == 4\nt.py:9"}
    assert bisect.classify([plain], 1, "") == (BAD, f"{TEST_A}: assert 3 == 4")


def test_find_fix_confirms_the_fix_and_the_bad_commit_before_it(
    played: Counter[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, commits = planted(tmp_path, {}, fixed=True)
    out = tmp_path / "fix.json"
    code = main(["bisect", str(tree), "--find-fix", "--bad", commits[0], "--good", "main",
                 "--json", str(out), "--", LIMITS])  # fmt: skip
    shown = capsys.readouterr().out
    assert code == 0, shown
    result = json.loads(out.read_text("utf-8"))
    assert result["found"]["hash"] == commits[6] and not result["cannot_tell"]
    assert played[commits[6]] == 3 and played[commits[5]] == 3
    assert f"first good commit: {commits[6][:12]} planted: fixes" in shown
    assert result["difference"] == f"{commits[5][:12]}: {TEST_A}: ProbeA MISSING threads"


@pytest.mark.parametrize("count", ["11", "-1", "two"])
def test_confirm_takes_a_bounded_count(count: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["bisect", "/tmp", "--good", "a", "--bad", "b", "--confirm", count, "--", LIMITS])
    assert done.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said.endswith(f"argument --confirm: {count!r}: give a whole number from 0 to 10")
