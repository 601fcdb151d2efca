"""The GitHub Actions workflows: the pull-request one runs README's test command in a
Debian 12 container, and zizmor (pinned in ci/setup.sh) finds nothing in either."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.codec.strict_yaml import read_yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = (
    ROOT / ".github" / "workflows" / "nightly.yml",
    ROOT / ".github" / "workflows" / "pull-request.yml",
)
README_TEST_COMMAND = "bash ci/setup.sh && bash ci/test.sh"


def zizmor() -> str:
    found = shutil.which("zizmor", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("zizmor not found next to this Python: run `bash ci/setup.sh`")
    return found


def audit(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [zizmor(), "--offline", "--no-progress", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_pull_request_workflow_runs_readmes_test_command_in_debian_12():
    assert README_TEST_COMMAND in (ROOT / "README.md").read_text("utf-8")
    ci_run = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert ci_run[-2:] == ["bash ci/setup.sh", "bash ci/test.sh"]  # what CI runs, too
    path = ROOT / ".github" / "workflows" / "pull-request.yml"
    workflow = read_yaml(path.read_text("utf-8"), str(path))
    assert set(workflow["on"]) == {"pull_request"}
    (job,) = workflow["jobs"].values()
    assert job["container"]["image"] == "debian:12"
    assert [s["run"] for s in job["steps"] if "run" in s] == [README_TEST_COMMAND]
    uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-")]
    assert uploads and uploads[0]["if"] == "always()"


def test_zizmor_finds_nothing_in_the_workflows():
    done = audit(*WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout


def test_zizmor_catches_an_injection_and_an_unpinned_action(tmp_path):
    """The audit can fail: the faults the workflows were fixed for are findings."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        'name: bad\n"on":\n  pull_request:\npermissions:\n  contents: read\njobs:\n'
        "  test:\n    runs-on: ubuntu-22.04\n    steps:\n"
        "      - uses: actions/checkout@v4\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    done = audit(bad)
    assert done.returncode != 0
    for finding in ("template-injection", "unpinned-uses", "artipacked"):
        assert finding in done.stdout, done.stdout
