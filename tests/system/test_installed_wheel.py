"""The harness as a user installs it: the sdist and the wheel built from it, checked
(``twine check``, the wheel's contents), the wheel in a fresh virtual environment outside
the repository, and a project of the user's own (``examples/user-project/``) that uses it.

They are made once per test session, shared by xdist workers.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from carried_token import left_after
from filelock import FileLock

from harness import __version__, shipped

REPOSITORY = shipped.checkout()
PROJECT = "examples/user-project"
_TIMEOUT_S = 600
_TOKEN = "ET_WHEEL_TEST_TOKEN"
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Installed:
    """The sdist, the wheel built from it, and the virtual environment it is installed in."""

    sdist: Path
    wheel: Path
    venv: Path

    def tool(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` in ``cwd`` with the environment a user has: no PYTHONPATH into the checkout."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        argv,
        cwd=cwd,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    if REPOSITORY is None:
        pytest.fail("these tests build the wheel from the harness's checkout")
    # This session's folder, seen by every xdist worker (each has its own below it).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    dist, venv = shared / "dist", shared / "wheel-venv"
    with FileLock(shared / "wheel.lock"):
        if not (venv / "bin" / "et-harness").exists():
            # python -m build: the sdist, then the wheel from the unpacked sdist, with the
            # build backend ci/setup.sh installs (an isolated one per build costs ~15 s).
            built = _run(
                [sys.executable, "-m", "build", "--no-isolation", "-o", str(dist), "."],
                REPOSITORY,
            )
            assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
            fresh = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], shared)
            assert fresh.returncode == 0, fresh.stderr
            (wheel,) = dist.glob("*.whl")
            # uv (ci/setup.sh installs it and the checkout's environment with it) installs
            # the wheel, its dependencies and pip (the harness fetches the ExecuTorch SDK
            # with `pip download`), at the versions ci/constraints.txt pins: 0.6 s of CPU,
            # where ensurepip took 4 s and the venv's pip 11 s.
            done = _run(
                [str(Path(sys.executable).parent / "uv"), "pip", "install", "-q",
                 "--python", str(venv / "bin" / "python"),
                 "-c", str(REPOSITORY / "ci" / "constraints.txt"), str(wheel), "pip"],
                shared,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-2000:]
    ((sdist,), (wheel,)) = (list(dist.glob("*.tar.gz")), list(dist.glob("*.whl")))
    return Installed(sdist, wheel, venv)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the sample user project, outside the repository."""
    assert REPOSITORY is not None
    copy = tmp_path / "user-project"
    shutil.copytree(REPOSITORY / PROJECT, copy, ignore=shutil.ignore_patterns("results"))
    return copy


def test_twine_finds_the_sdist_and_the_wheel_well_formed(installed: Installed) -> None:
    twine = Path(sys.executable).parent / "twine"
    done = _run(
        [str(twine), "check", "--strict", str(installed.sdist), str(installed.wheel)], Path.cwd()
    )
    assert done.returncode == 0 and done.stdout.count("PASSED") == 2, done.stdout + done.stderr


def test_the_wheel_holds_everything_the_harness_needs(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for needed in (
        "harness/_shipped/agent/executorch-sdk.lock",
        "harness/_shipped/agent/runtime/CMakeLists.txt",
        "harness/_shipped/agent/runtime/race-suppressions.yaml",
        "harness/_shipped/agent/codec/include/etb/wire.h",
        "harness/_shipped/agent/cmake/aarch64-linux-gnu.cmake",
        "harness/_shipped/agent/mcu/Makefile",
        "harness/_shipped/devices/host.yaml",
        "harness/_shipped/devices/ssh-emu.yaml",
        "harness/_shipped/examples/maps/sample.yaml",
        "harness/suites/__init__.py",
        "harness/suites/test_dispatch.py",
        "harness/shipped.py",
    ):
        assert needed in names, f"the wheel lacks {needed}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert installed.wheel.name.startswith(f"executorch_hil_harness-{__version__}-")


def test_the_installed_harness_is_not_the_checkout(installed: Installed, tmp_path: Path) -> None:
    script = "import harness, harness.shipped as s; print(s.checkout(), harness.__file__)"
    done = _run([installed.tool("python"), "-c", script], tmp_path)
    checkout, where = done.stdout.split()
    assert checkout == "None" and str(installed.venv) in where, done.stderr
    version = _run([installed.tool("et-harness"), "--version"], tmp_path)
    assert version.stdout.strip() == f"et-harness {__version__}", version.stderr


@pytest.mark.parametrize(
    ("device", "name"),
    [
        pytest.param(None, "host", id="no-device"),  # bare pytest: the default device
        pytest.param("ssh-emu", "ssh-emu", id="ssh-emu"),
        pytest.param("devices/my-board.yaml", "my-board", id="my-board-file"),  # README
    ],
)
def test_the_user_project_passes_on(
    installed: Installed, project: Path, device: str | None, name: str
) -> None:
    token = secrets.token_hex(8)  # inherited by whatever the run starts
    chosen = ["--device", device] if device is not None else []
    done = _run(
        [installed.tool("pytest"), *chosen, "-p", "no:cacheprovider"],
        project,
        **{_TOKEN: token},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # The agent, sshd, the emulators and, last, the run's janitor: all gone.
    assert left_after(_TOKEN, token, within_s=15) == set()
    assert f"devices: {name}\n" in done.stdout and "1 passed" in done.stdout, done.stdout
    (run_json,) = (project / "results").glob("*/run.json")
    assert json.loads(run_json.read_text())["harness_version"] == __version__


def test_a_shipped_suite_by_package_name_runs_on_the_default_device(
    installed: Installed, project: Path
) -> None:
    """``pytest --pyargs harness.suites.X`` in the user's project, no --device: host."""
    done = _run(
        [
            installed.tool("pytest"),
            *("--pyargs", "harness.suites.test_load_paths", "-k", "keep_without"),
            *("-p", "no:cacheprovider"),
        ],
        project,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "devices: host\n" in done.stdout
    assert re.search(r"\b4 passed", done.stdout.strip().splitlines()[-1]), done.stdout[-2000:]


def test_readmes_commands_and_doctor_pass_in_the_user_project(
    installed: Installed, project: Path
) -> None:
    """README's commands that name files, as a user of the installed harness types them in
    the project ("Using it"), and ``et-harness doctor`` there: the project's device and the
    default one, not the built-in examples, no path into the installed package."""
    et = installed.tool("et-harness")
    token = secrets.token_hex(8)
    for argv in (
        [et, "devices"],
        [et, "map", "sample", "--hex"],
        [et, "map", "maps/app.yaml"],
        [et, "send", "sample", "--device", "ssh-emu", "--action", "set"],
        [et, "send", "sample", "--action", "get"],
        [et, "send", "--program", "programs/model.pte", "--options", "maps/app.yaml"],
    ):
        done = _run(argv, project, **{_TOKEN: token})
        assert done.returncode == 0, [*argv[1:], done.stdout[-3000:], done.stderr[-2000:]]
    assert left_after(_TOKEN, token, within_s=15) == set()  # sshd and the agents
    doctor = _run([et, "doctor"], project)
    assert doctor.returncode == 0, doctor.stdout[-3000:] + doctor.stderr[-2000:]
    checking, programs, *lines = doctor.stdout.splitlines()
    assert checking.startswith("checking my-board, host: ") and programs.endswith(":"), checking
    rows = [line.split()[:2] for line in lines if not line.startswith(" ")]
    assert rows == [["my-board", "ok"], ["host", "ok"]], doctor.stdout
    assert "site-packages" not in doctor.stdout + doctor.stderr, doctor.stdout


def test_a_planted_wrong_map_fails_naming_the_difference(
    installed: Installed, project: Path
) -> None:
    app = project / "maps" / "app.yaml"
    app.write_text(app.read_text().replace("weight_cache_enabled", "weight_cache_enable"))
    done = _run([installed.tool("pytest"), "--device", "host", "-p", "no:cacheprovider"], project)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 failed" in done.stdout
    assert (
        "XnnpackBackend: option weight_cache_enable (bool false): not an option XnnpackBackend "
        "knows (nearest: weight_cache_enabled)" in done.stdout
    )


def test_et_harness_run_runs_the_shipped_suites(installed: Installed, tmp_path: Path) -> None:
    done = _run([installed.tool("et-harness"), "run", "--device", "host", "-q"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    passed = re.match(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 400, summary  # every shipped suite ran
    assert not re.search(r"\d+ (failed|error)", summary), summary
    assert "warning" not in summary, done.stdout[-3000:]  # a user's plain run shows none
    assert list((tmp_path / "results").glob("*/report.html"))  # results where the user ran it


def test_et_harness_run_in_the_user_project_uses_its_profiles_and_configuration(
    installed: Installed, project: Path
) -> None:
    """my-board is the project's own profile; pytest.ini's --strict-options applies."""
    token = secrets.token_hex(8)  # inherited by whatever the run starts
    done = _run(
        [installed.tool("et-harness"), "run", "--device", "my-board", "-k", "dispatch"],
        project,
        **{_TOKEN: token},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert left_after(_TOKEN, token, within_s=15) == set()  # the agents and the janitor
    assert re.search(r"\d+ passed", done.stdout.strip().splitlines()[-1]), done.stdout[-2000:]
    assert f"rootdir: {project}" in done.stdout and "configfile: pytest.ini" in done.stdout
    assert list((project / "results").glob("*/report.html"))


def test_a_broken_installation_fails_harness_commands_in_one_line_only(
    installed: Installed, tmp_path: Path
) -> None:
    """The package without its files: the harness's commands say so in one line; a pytest run
    of an unrelated project in the same environment still passes (the plugin is loaded)."""
    site = next((installed.venv / "lib").glob("python3*/site-packages"))
    broken = tmp_path / "broken"
    shutil.copytree(site / "harness", broken / "harness", ignore=shutil.ignore_patterns("_shipped"))
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    # Another project's own test: it passes only if pytest, the plugin loaded, runs it.
    (unrelated / "test_it.py").write_text("def test_sum():\n    assert sum([1, 2]) == 3\n")
    env = {"PYTHONPATH": str(broken)}
    passed = _run([installed.tool("pytest"), "-p", "no:cacheprovider"], unrelated, **env)
    assert passed.returncode == 0 and "1 passed" in passed.stdout, passed.stdout + passed.stderr
    for argv in (
        [installed.tool("et-harness"), "devices"],
        [installed.tool("pytest"), "--device", "host", "-p", "no:cacheprovider"],
    ):
        done = _run(argv, unrelated, **env)
        said = (done.stdout + done.stderr).strip().splitlines()
        assert done.returncode != 0 and "Traceback" not in done.stderr, said
        line = [text for text in said if "installation is incomplete" in text]
        assert len(line) == 1 and "reinstall it" in line[0], said


def test_the_core_needs_no_extra_and_each_feature_names_its_own(
    installed: Installed, project: Path
) -> None:
    """The wheel installed alone has none of the extras' packages: every module of the
    harness still imports, the user's runs pass, and each feature that needs an extra
    says which in one line (a lab profile, a PostgreSQL history, the trend charts)."""
    python = installed.tool("python")
    script = (
        "import importlib, importlib.util, pkgutil, harness\n"
        "absent = [m for m in ('labgrid', 'grpc', 'psycopg', 'matplotlib')\n"
        "          if importlib.util.find_spec(m) is None]\n"
        "names = [m.name for m in pkgutil.walk_packages(harness.__path__, 'harness.')\n"
        "         if not m.name.endswith('.__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(','.join(absent), len(names))\n"
    )
    done = _run([python, "-c", script], project)
    assert done.returncode == 0, done.stderr[-3000:]
    absent, modules = done.stdout.split()
    assert absent == "labgrid,grpc,psycopg,matplotlib" and int(modules) > 150, done.stdout

    (project / "devices" / "lab-board.yaml").write_text(
        "description: a board of a labgrid lab\n"
        "transport: {kind: ssh, labgrid: {place: board-7}, known_hosts: known_hosts}\n"
        "work_dir: /tmp/et-harness\n"
    )
    pytest_argv = [installed.tool("pytest"), "-p", "no:cacheprovider"]
    lab = _run([*pytest_argv, "--device", "lab-board"], project)
    said = (lab.stdout + lab.stderr).strip().splitlines()
    assert lab.returncode != 0 and "Traceback" not in lab.stderr, said
    assert any(
        "transport.labgrid: a labgrid place needs the [lab] extra" in line
        and "pip install 'executorch-hil-harness[lab]'" in line
        for line in said
    ), said

    postgres = _run(
        [*pytest_argv, "--device", "host", "--history", "postgresql://et@127.0.0.1/history"],
        project,
    )
    assert postgres.returncode == 0, postgres.stdout[-3000:] + postgres.stderr[-2000:]
    assert (
        "PostgreSQL needs the [history] extra (psycopg not installed here): "
        "pip install 'executorch-hil-harness[history]'" in postgres.stderr
    ), postgres.stderr

    history = str(project / "history.sqlite")
    for run in ("first", "second"):
        done = _run(
            [*pytest_argv, "--device", "host", "--history", history, "--results-dir", run],
            project,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    first = (project / "first" / "report.html").read_text("utf-8")
    second = (project / "second" / "report.html").read_text("utf-8")
    assert 'id="trends"' not in first  # one run: no trend to show
    assert "Drawing the trend charts needs the [history] extra (matplotlib not installed" in second
