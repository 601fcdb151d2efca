"""The run history through real pytest runs of the suites on the host device: two
nightly-like runs with one check changed in between, named by ``et-harness history``
and shown (with trend charts) by the report in headless Chromium; the same on a real
PostgreSQL server with two runners at once; a damaged store that fails no run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, first_screen
from postgres_server import postgres_server
from prerequisites import require
from run_environment import run_environment

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
SELECTED = "set_option_each and (2-backends or 3-backends) or seeded"
SEEDED = """\
from harness.data.options import BackendOptions, Option, OptionsMap

def test_seeded_threads(et):
    verdict = et.set(OptionsMap((BackendOptions("ProbeA", (Option("threads", 4),)),)))
    verdict.raise_for_differences()
    assert {expect}, "the seeded change: this check fails from the second run on"
"""
SEEDED_ID = "test_seeded_threads[host]"


def nightly(store: str, tmp_path: Path, name: str, change: bool) -> subprocess.Popen[str]:
    """A run of a few suite tests and the seeded check, its results in ``tmp_path/name``.

    The run is in a tree whose ``suites/`` links to the project's suite files and holds
    the seeded check too, so that every test id is what a run in the project has.
    """
    tree = tmp_path / "tree"
    suites = tree / "suites"
    if not suites.is_dir():
        suites.mkdir(parents=True)
        for path in (REPO / "suites").glob("*.py"):
            (suites / path.name).symlink_to(path)
    (suites / "test_seeded.py").write_text(
        SEEDED.format(expect="False" if change else "True"), "utf-8"
    )
    env = run_environment()
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites/test_dispatch.py",
            "suites/test_seeded.py",
            "-c",
            str(REPO / "pyproject.toml"),
            "--rootdir",
            str(tree),
            "-p",
            "no:cacheprovider",
            "-q",
            "--device",
            "host",
            "-k",
            SELECTED,
            "--history",
            store,
            "--results-dir",
            str(tmp_path / name),
        ],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished(run: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = run.communicate(timeout=300)
    return run.returncode, out


def history_json(store: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "history", "--history", store, "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_nightly_runs_name_the_changed_check_and_the_report_shows_it_in_chromium(tmp_path):
    require("chromium")
    store = str(tmp_path / "history.sqlite")
    code, out = finished(nightly(store, tmp_path, "night-1", change=False))
    assert code == 0, out
    code, out = finished(nightly(store, tmp_path, "night-2", change=True))
    assert code == 1 and "1 failed, 2 passed" in out, out
    assert f"suites/test_seeded.py::{SEEDED_ID}" in out
    report = history_json(store)
    diff = report["since_last"]
    assert diff["previous"]["name"] == "night-1" and report["run"]["name"] == "night-2"
    assert [c["nodeid"].split("::")[-1] for c in diff["new_failures"]] == [SEEDED_ID]
    assert (diff["fixed"], diff["still_failing"], diff["new_infra"]) == ([], [], [])
    (began,) = report["regressions"]
    assert (began["first_failing"]["run"], began["last_good"]["run"]) == ("night-2", "night-1")
    assert began["last_good"]["runtime"].startswith("executorch ")
    assert report["run"]["state"] == "complete" and report["run"]["exit_status"] == 1
    assert (tmp_path / "night-2" / "history.json").is_file()

    page = tmp_path / "night-2" / "report.html"
    text = page.read_text("utf-8")
    assert "<script" not in text and ' src="' not in text and 'href="http' not in text
    assert text.count("<svg") == 5 and "New failures (1)" in text
    # The first screen is the answer: the verdict, the failing test with why it failed,
    # the backends' checks; the matrix (the seeded suite's row first) and the trend charts
    # are below it.
    screen = first_screen(page, tmp_path)
    assert "2 passed, 1 failed. 1 not passed: why." in screen[0], screen  # a link to the list
    headings = [line for line in screen if line.startswith("h2: ")]
    assert headings[:2] == ["h2: Not passed (1)", "h2: Backends: option checks per device"]
    assert text.index("<th>suites/test_seeded.py</th>") < text.index("<th>suites/test_dispatch.py")
    failing = next(line for line in screen if line.startswith("li: failed"))
    assert SEEDED_ID in failing and "the seeded change" in failing, failing
    assert not any(line.startswith("figure") for line in screen)
    # One run is no trend: the first night's report has no charts at all.
    assert "<svg" not in (tmp_path / "night-1" / "report.html").read_text("utf-8")
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    assert 'id="history"' in dom and "New failures (1)" in dom and SEEDED_ID in dom
    assert "compared with run night-1 (complete)" in dom
    assert dom.count("<svg") == 5 and "pass rate per device" in dom and "case time" in dom
    shot = tmp_path / "shot.png"
    chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1200,2400")
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[20:24], "big") == 2400

    # The nightly report job: a fresh store caught up from the jobs' results directories.
    later, page = str(tmp_path / "later.sqlite"), tmp_path / "history.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "history",
            "--history",
            later,
            "--catch-up",
            str(tmp_path),
            "--html",
            str(page),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(": 3 of 3 tests added") == 2 and "new failures (1)" in done.stdout
    assert history_json(later)["since_last"] == diff
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    assert "Since the last run: night-1 on host" in dom and "Since the last run: night-2" in dom
    assert "New failures (1)" in dom and dom.count("<svg") == 5


def test_two_runners_at_once_on_a_real_postgresql_server_then_the_change(tmp_path):
    require("chromium")
    with postgres_server() as url:
        runners = [nightly(url, tmp_path, f"runner-{n}", change=False) for n in (1, 2)]
        for runner in runners:
            code, out = finished(runner)
            assert code == 0, out
        code, out = finished(nightly(url, tmp_path, "night-2", change=True))
        assert code == 1, out
        report = history_json(url)
    assert report["runs"] == 3
    diff = report["since_last"]
    assert diff["previous"]["name"] in ("runner-1", "runner-2")
    assert [c["nodeid"].split("::")[-1] for c in diff["new_failures"]] == [SEEDED_ID]
    (host,) = report["health"]["device"]
    assert [p["tests"] for p in host["points"]] == [3, 3, 3]
    assert [p["passed"] for p in host["points"]] == [3, 3, 2]
    page = tmp_path / "night-2" / "report.html"
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    assert "New failures (1)" in dom and SEEDED_ID in dom and dom.count("<svg") == 5
    assert "postgresql+psycopg://et@/history" in dom


def test_a_damaged_store_fails_no_run_and_the_report_says_so(tmp_path):
    store = tmp_path / "history.sqlite"
    store.write_bytes(b"\x00garbage" * 512)
    code, out = finished(nightly(str(store), tmp_path, "night", change=False))
    assert code == 0, out
    assert "not an SQLite database" in out and "results.jsonl keeps" in out
    assert "Traceback" not in out
    assert len((tmp_path / "night" / "results.jsonl").read_text().splitlines()) == 3
    html = (tmp_path / "night" / "report.html").read_text("utf-8")
    assert "The run history is not available" in html
    code, out = finished(nightly("mysql://et@db/h", tmp_path, "refused", change=False))
    assert code == 4 and "--history: mysql:// is not supported; give an SQLite" in out, out
    assert not (tmp_path / "refused").exists()


def test_the_nightly_report_job_catches_every_job_up_and_publishes_the_history():
    from harness.codec.strict_yaml import read_yaml

    workflow = read_yaml(
        (REPO / ".github" / "workflows" / "nightly.yml").read_text(),
        ".github/workflows/nightly.yml",
    )
    assert isinstance(workflow, dict), workflow
    assert workflow["env"]["ET_HARNESS_HISTORY"] == "${{ secrets.ET_HISTORY_URL }}"
    steps = workflow["jobs"]["report"]["steps"]
    run = "\n".join(step.get("run", "") for step in steps)
    assert "bash ci/nightly-report.sh all-results merged" in run  # the one report script
    script = (REPO / "ci" / "nightly-report.sh").read_text()
    assert 'history --catch-up "$results" --night --html "$out/history.html"' in script
    assert 'history --json > "$out/history.json"' in script
    cache = [step for step in steps if "actions/cache" in step.get("uses", "")]
    assert [step["with"]["path"] for step in cache] == ["history", "history"]
    assert all(step["if"].endswith("env.ET_HARNESS_HISTORY == ''") for step in cache)
