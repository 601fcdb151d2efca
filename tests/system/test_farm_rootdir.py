"""Path options: absolute paths never move pytest's rootdir or change what it collects,
and a place the run cannot write is refused at once with a one-line usage error.

Each test runs pytest in a subprocess in a small project of its own (a
``pyproject.toml`` whose ``testpaths`` name ``suite/``, and a ``unit/`` directory
that must not be collected), with the harness's path options pointing outside it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from run_environment import run_environment

PYPROJECT = '[tool.pytest.ini_options]\ntestpaths = ["suite"]\n'
SUITE = "def test_in_suite():\n    pass\n"
UNIT = "def test_unit_only():\n    pass\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "suite").mkdir(parents=True)
    (root / "unit").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT, "utf-8")
    (root / "suite" / "test_suite.py").write_text(SUITE, "utf-8")
    (root / "unit" / "test_unit.py").write_text(UNIT, "utf-8")
    return root


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory outside the project holding a device profile, a results dir, a report."""
    other = tmp_path / "elsewhere"
    (other / "results").mkdir(parents=True)
    profile = {
        "name": "outside",
        "transport": {"kind": "local"},
        "work_dir": str(tmp_path / "work"),
    }
    (other / "outside.yaml").write_text(yaml.safe_dump(profile), "utf-8")
    (other / "report.html").write_text("", "utf-8")
    return other


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = run_environment(all_plugins=True)  # as a user's runs
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("form", ["device", "results-dir", "html-report"])
@pytest.mark.parametrize("joined", [False, True], ids=["space", "equals"])
def test_an_absolute_path_option_keeps_rootdir_and_collection(project, elsewhere, form, joined):
    value = {
        "device": elsewhere / "outside.yaml",
        "results-dir": elsewhere / "results",
        "html-report": elsewhere / "report.html",
    }[form]
    option = [f"--{form}={value}"] if joined else [f"--{form}", str(value)]
    run = _pytest(project, "--collect-only", *option)  # the header, then the tree collected
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"rootdir: {project}" in run.stdout, run.stdout
    assert "configfile: pyproject.toml" in run.stdout
    tree = [line.strip() for line in run.stdout.splitlines() if line.lstrip().startswith("<")]
    suite = ["<Dir suite>", "<Module test_suite.py>", "<Function test_in_suite>"]
    assert tree == ["<Dir project>", *suite], run.stdout


def test_an_absolute_device_path_under_xdist_runs_the_projects_tests_on_every_worker(
    project, elsewhere
):
    run = _pytest(
        project,
        "-n",
        "2",
        "--device",
        str(elsewhere / "outside.yaml"),
        "--results-dir",
        str(elsewhere / "results"),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout and "test_unit_only" not in run.stdout


def test_explicit_test_paths_still_win(project, elsewhere):
    run = _pytest(
        project, "--collect-only", "-q", "--device", str(elsewhere / "outside.yaml"), "unit"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert [line for line in run.stdout.splitlines() if "::" in line] == [
        "unit/test_unit.py::test_unit_only"
    ]


@pytest.mark.parametrize(
    "option",
    [
        ["--results-dir", "{file}/results"],
        ["--html-report", "{file}/report.html"],
        ["--results-dir", "/proc/et-harness-results"],
        ["--html-report", "{dir}"],
    ],
)
def test_an_unwritable_results_place_is_a_one_line_usage_error(project, elsewhere, option):
    blocker = elsewhere / "a-file"
    blocker.write_text("", "utf-8")
    args = [arg.format(file=blocker, dir=elsewhere) for arg in option]
    run = _pytest(project, "--device", str(elsewhere / "outside.yaml"), *args)
    assert run.returncode == 4, run.stdout + run.stderr
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: {option[0]}: cannot write "), errors
    assert "Traceback" not in run.stdout + run.stderr


def test_without_device_the_default_one_serves_unless_the_folders_cannot_be_read(project):
    """No --device: a test with a device runs on host; a project whose device folders are
    not on this machine still runs its other tests, and one with a device fails in a line."""
    (project / "suite" / "test_device.py").write_text(
        "def test_on_device(device_profile):\n    assert device_profile.name == 'host'\n"
    )
    run = _pytest(project, "--results-dir", str(project / "results"))
    assert run.returncode == 0 and "devices: host\n" in run.stdout, run.stdout + run.stderr
    assert "2 passed" in run.stdout.splitlines()[-1], run.stdout
    (project / "pyproject.toml").write_text(PYPROJECT + 'et_devices_dirs = ["lab"]\n', "utf-8")
    plain = _pytest(project, "suite/test_suite.py")
    assert plain.returncode == 0 and "1 passed" in plain.stdout, plain.stdout + plain.stderr
    device = _pytest(project)
    said = f"et_devices_dirs: {project / 'lab'} is not a folder"
    assert device.returncode != 0 and said in device.stdout + device.stderr, device.stdout
    assert "Traceback" not in device.stdout + device.stderr


@pytest.mark.parametrize("door", ["et-harness run", "pytest SUITES"])
def test_a_projects_device_is_found_by_run_and_pytest_as_devices_lists_it(project, door):
    """From a project with its own devices/, with the tests elsewhere (the harness's
    suites), the name ``et-harness devices`` lists there is the one a run finds."""
    from harness import shipped

    (project / "devices").mkdir()
    (project / "devices" / "arm64-pool.yaml").write_text("transport: {kind: local}\n", "utf-8")
    env = run_environment(all_plugins=True)
    listed = subprocess.run(
        [sys.executable, "-m", "harness.cli", "devices"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # listed relative to where the command runs (the project)
    listed_pool = r"^arm64-pool +local +\[the project's devices/: devices\]$"
    assert re.search(listed_pool, listed.stdout, re.M), listed.stdout
    if door == "et-harness run":
        argv = [sys.executable, "-m", "harness.cli", "run"]
    else:
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(shipped.suites_dir())]
    run = subprocess.run(
        [*argv, "--device", "arm64-pool", "--collect-only", "-q", "-k", "int-below-int32"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "test_out_of_spec_map_is_refused_on_the_host[int-below-int32]" in run.stdout
