"""A results disk that fills up or turns read-only mid-run (issue #24, fault 1).

A real tmpfs, mounted in the test's directory and unmounted after it, holds the
results directory; a test case of the run itself fills it, frees it or remounts it
read-only, so the disk changes between two results of one run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prerequisites import require
from test_farm_runs import Farm, Run

PAGE = 4096
DISK_PAGES = 16

CASES = """\
import os
import subprocess

import pytest

from harness.data.options import OptionsMap

DISK = {disk!r}


@pytest.mark.parametrize("n", range({count}))
def test_set(et, n):
    if n == {full_at}:  # fill the disk, leaving less than one result's line free
        filler = os.open(os.path.join(DISK, "filler"), os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(filler, b"x" * 256)
        except OSError:
            pass
        os.close(filler)
    if n == {free_at}:
        os.remove(os.path.join(DISK, "filler"))
    if n == {read_only_at}:
        subprocess.run(["mount", "-o", "remount,ro", DISK], check=True)
    options = OptionsMap.from_dict({{"ProbeA": {{"k": n}}, "ProbeB": {{"s": str(n)}}}})
    et.set(options).raise_for_differences()
"""


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 16 pages at ``tmp_path/disk``; unmounted afterwards."""
    require("mount", "umount", root=True)
    place = tmp_path / "disk"
    place.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_PAGES * PAGE}", "tmpfs", str(place)],
        check=True,
    )
    try:
        yield place
    finally:
        subprocess.run(["umount", str(place)], check=True)


def _run(
    farm: Farm,
    disk: Path,
    *,
    full_at: int = -1,
    free_at: int = -1,
    read_only_at: int = -1,
    count: int = 30,
) -> tuple[Run, Path]:
    """Run ``count`` tests on the host with the results on ``disk``; a later
    ``--results-dir`` wins over the one :class:`Farm` gives."""
    (farm.root / "test_cases.py").write_text(
        CASES.format(
            disk=str(disk), count=count, full_at=full_at, free_at=free_at, read_only_at=read_only_at
        ),
        "utf-8",
    )
    farm.profile("host")
    results = disk / "results"
    return farm.run(
        "--device", "host", "--results-dir", str(results), timeout=180
    ), results / "results.jsonl"


def _farm(tmp_path: Path) -> Farm:
    (tmp_path / "farm").mkdir()
    (tmp_path / "work").mkdir()
    return Farm(tmp_path / "farm", tmp_path / "work")


def _lines(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` as JSON: a cut-short line fails the test here."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), data[-200:]
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def _reported(run: Run) -> list[str]:
    """What the run said about writes that failed (stderr lands amid the progress dots)."""
    return re.findall(r"et-harness: cannot write [^\n]*", run.stdout)


def _names(results: list[dict[str, Any]]) -> list[str]:
    return [r["nodeid"].split("::")[-1] for r in results]


def test_a_disk_that_fills_mid_run_loses_no_result_once_space_returns(tmp_path, disk):
    farm = _farm(tmp_path)
    run, results = _run(farm, disk, full_at=3, free_at=20)
    assert "INTERNALERROR" not in run.stdout and "Traceback" not in run.stdout, run.stdout
    assert run.returncode == 0, run.stdout
    assert _reported(run) == [
        f"et-harness: cannot write {results}: No space left on device (ENOSPC); the run goes "
        "on, holding its results in memory (up to 64 MiB) until the disk takes them again"
    ], run.stdout
    assert _names(_lines(results)) == [f"test_set[host-{n}]" for n in range(30)]
    assert "30 passed" in run.stdout and "NOT WRITTEN" not in run.stdout


def test_a_disk_that_stays_full_keeps_whole_lines_and_the_report_says_what_is_missing(
    tmp_path, disk
):
    farm = _farm(tmp_path)
    run, results = _run(farm, disk, full_at=3)
    assert "INTERNALERROR" not in run.stdout and "Traceback" not in run.stdout, run.stdout
    written = _names(_lines(results))
    assert written == [f"test_set[host-{n}]" for n in range(len(written))]
    assert 3 <= len(written) < 30
    assert "30 passed" in run.stdout, run.stdout  # every test ran
    assert (
        f"NOT WRITTEN: {30 - len(written)} of 30 results are not in {results} "
        "(No space left on device (ENOSPC)); they are only in this summary and the JUnit XML, "
        "if any"
    ) in run.stdout
    assert run.returncode == 1, run.stdout  # an incomplete record is no green run


def test_a_disk_that_turns_read_only_mid_run_stops_neither_the_run_nor_the_summary(tmp_path, disk):
    farm = _farm(tmp_path)
    run, results = _run(farm, disk, read_only_at=10, count=20)
    assert "INTERNALERROR" not in run.stdout and "Traceback" not in run.stdout, run.stdout
    assert _names(_lines(results)) == [f"test_set[host-{n}]" for n in range(10)]
    assert _reported(run) == [
        f"et-harness: cannot write {results}: Read-only file system (EROFS); the run goes "
        "on, holding its results in memory (up to 64 MiB) until the disk takes them again",
        f"et-harness: cannot write {results.parent / 'run.json'}: Read-only file system (EROFS)",
    ], run.stdout
    assert "20 passed" in run.stdout and "== device farm ==" in run.stdout
    assert "NOT WRITTEN: 10 of 20 results" in run.stdout
    assert run.returncode == 1, run.stdout


def test_a_cut_short_last_line_is_dropped_when_the_file_is_opened_again(tmp_path):
    from harness.results.directory import ResultsWriter
    from harness.results.records import CaseResult

    path = tmp_path / "results.jsonl"
    whole = '{"nodeid": "a"}\n'
    path.write_text(whole + '{"nodeid": "b", "dev', "utf-8")
    result = CaseResult.from_json('{"nodeid": "c", "outcome": "passed"}')
    writer = ResultsWriter(path)
    writer.write(result)
    writer.close()
    assert path.read_text("utf-8") == whole + result.to_json() + "\n"
    assert writer.unwritten == 0


def test_crash_artifacts_a_full_disk_refuses_cost_one_line_not_the_test(disk, capsys):
    from harness.results.artifacts import CrashArtifacts
    from harness.transport.base import TransportLost

    filler = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)  # the disk is full first
    try:
        while True:
            os.write(filler, b"x" * 4096)
    except OSError:
        pass
    os.close(filler)
    artifacts = CrashArtifacts(disk / "results", "board", "test_x")
    path = artifacts.keep_text(1, "tsan-report.txt", "x" * 100_000)
    core = disk.parent / "core"
    core.write_bytes(b"\0" * 100_000)

    def pull(dest: Path) -> list[Path]:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "core").write_bytes(core.read_bytes())
        return [dest / "core"]

    artifacts.after_failure(TransportLost("agent died"), 2, pull)
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and all(
        line.startswith("et-harness: cannot keep crash artifacts in ") for line in said
    ), said
    assert "(ENOSPC)" in said[0] and "(ENOSPC)" in said[1]
    assert path == "artifacts/board/test_x/try-1/tsan-report.txt" and artifacts.paths == []
