"""The GitHub Actions workflows: the pull-request one runs README's test command in a
Debian 12 container, and zizmor and actionlint (pinned in ci/constraints.txt) find nothing
in either; both fail a workflow planted with the faults they are there for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.codec.strict_yaml import read_yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = (
    ROOT / ".github" / "workflows" / "nightly.yml",
    ROOT / ".github" / "workflows" / "lab-nightly.yml",
    ROOT / ".github" / "workflows" / "pull-request.yml",
)
README_TEST_COMMAND = "bash ci/setup.sh && bash ci/test.sh"


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} not found next to this Python: run `bash ci/setup.sh`")
    return found


def audit(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", *map(str, paths)],
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
    assert isinstance(workflow, dict), workflow
    assert set(workflow["on"]) == {"pull_request"}
    assert set(workflow["jobs"]) == {"unit", "test"}
    job = workflow["jobs"]["test"]
    assert job["container"]["image"] == "debian:12"
    assert [s["run"] for s in job["steps"] if "run" in s] == [README_TEST_COMMAND]
    uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-")]
    assert uploads and uploads[0]["if"] == "always()"


def test_the_unit_tests_run_on_three_pythons_without_the_extras():
    path = ROOT / ".github" / "workflows" / "pull-request.yml"
    workflow = read_yaml(path.read_text("utf-8"), str(path))
    assert isinstance(workflow, dict), workflow
    unit = workflow["jobs"]["unit"]
    assert unit["strategy"]["matrix"]["python"] == ["3.11", "3.12", "3.13"]
    (steps,) = [s["run"].splitlines() for s in unit["steps"] if "run" in s]
    install, run = steps
    assert install.endswith(" -e .")  # the harness alone: no [lab], no [history]
    assert run.startswith("python -m pytest tests/unit ")


def test_the_nightly_workflow_runs_the_whole_zoo():
    """The zoo's cases marked nightly (tests/system/test_program_zoo.py) run in a job of their own
    on Debian 12, set up as the README says."""
    workflow = read_yaml(WORKFLOWS[0].read_text("utf-8"), str(WORKFLOWS[0]))
    assert isinstance(workflow, dict), workflow
    jobs = workflow["jobs"]
    runs = {
        name: [step.get("run", "") for step in job.get("steps", [])]
        for name, job in jobs.items()
        if any(
            "tests/system/test_program_zoo.py -m nightly" in step.get("run", "")
            for step in job.get("steps", [])
        )
    }
    assert list(runs) == ["program-zoo"], runs
    assert jobs["program-zoo"]["container"]["image"] == "debian:12"
    assert "bash ci/setup.sh" in runs["program-zoo"]


def test_the_nightly_workflow_runs_ten_minutes_of_chaos_with_a_fixed_seed():
    """A job of its own runs `et-harness chaos` for 600 s with a seed written in the
    workflow (the same schedule every night), in a privileged Debian 12 container set up
    as the README says, and uploads its folder even when an invariant broke."""
    workflow = read_yaml(WORKFLOWS[0].read_text("utf-8"), str(WORKFLOWS[0]))
    assert isinstance(workflow, dict), workflow
    jobs = workflow["jobs"]
    chaos = {
        name: step["run"]
        for name, job in jobs.items()
        for step in job.get("steps", [])
        if "et-harness chaos" in step.get("run", "")
    }
    assert list(chaos) == ["chaos"], chaos
    words = chaos["chaos"].split()
    assert words[words.index("--duration") + 1] == "600"
    assert words[words.index("--seed") + 1].isdecimal()
    job = jobs["chaos"]
    assert job["container"]["image"] == "debian:12"
    assert "--privileged" in job["container"]["options"]
    runs = [step.get("run", "") for step in job["steps"]]
    assert runs.index("bash ci/setup.sh") < runs.index(chaos["chaos"])
    short = "pytest tests/system/test_chaos.py -m nightly"  # the short run, planted checks
    assert any(short in run for run in runs), runs
    folder = words[words.index("--results-dir") + 1]
    (upload,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-")]
    assert upload["if"] == "always()" and upload["with"]["path"] == folder


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


def actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    """actionlint with the repository's settings (.github/actionlint.yaml)."""
    config = ROOT / ".github" / "actionlint.yaml"
    return subprocess.run(
        [tool("actionlint"), "-config-file", str(config), "-no-color", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_actionlint_finds_nothing_in_the_workflows():
    done = actionlint(*WORKFLOWS)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


def test_actionlint_catches_a_misspelt_key_and_an_undefined_context(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(
        'name: bad\n"on":\n  pull_request:\njobs:\n  test:\n    runs-onn: [self-hosted, et-lab]\n'
        "    steps:\n      - run: echo ${{ github.evnt.number }}\n"
    )
    done = actionlint(bad)
    assert done.returncode == 1
    assert 'unexpected key "runs-onn" for "job" section' in done.stdout, done.stdout
    assert 'property "evnt" is not defined' in done.stdout, done.stdout


def test_pre_commit_runs_what_ci_runs(tmp_path):
    """Every style check of CI is a pre-commit hook, and they pass on the repository."""
    config = read_yaml((ROOT / ".pre-commit-config.yaml").read_text("utf-8"), "pre-commit")
    assert isinstance(config, dict), config
    hooks = [hook["id"] for repo in config["repos"] for hook in repo["hooks"]]
    assert hooks == ["ruff-check", "ruff-format", "mypy", "clang-format", "zizmor", "actionlint"]
    venv_bin = str(Path(sys.executable).parent)
    done = subprocess.run(
        [tool("pre-commit"), "run", "--all-files"],
        cwd=ROOT,
        env={
            **os.environ,
            "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
            "PRE_COMMIT_HOME": str(tmp_path / "pre-commit"),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.stdout.count("Passed") == len(hooks), done.stdout
