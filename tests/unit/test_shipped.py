"""The harness finds its own files through harness/shipped.py only, reads none of them when
the plugin is imported, and looks up device names in the project's folders first."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness import shipped
from harness.farm.selection import DeviceSelectionError, select_profiles
from harness.profiles.device_folders import (
    DeviceFolder,
    listing,
    of_project,
    of_working_directory,
    with_built_in,
)
from harness.profiles.validator import ProfileError

PACKAGE = Path(harness.__file__).resolve().parent


def _layout_lookups(path: Path) -> list[str]:
    """``Path(__file__)...parents[N]`` / ``.parent.parent`` in ``path``: the repository's
    layout used to find files."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in ("parents", "parent"):
            source = ast.unparse(node)
            if "__file__" in source and (node.attr == "parents" or ".parent.parent" in source):
                found.append(f"{path.name}:{node.lineno}: {source}")
    return found


def test_no_module_finds_files_through_the_repository_layout() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _layout_lookups(path)]
    assert not found, "use harness/shipped.py instead: " + "; ".join(found)


def test_the_scan_finds_a_layout_lookup(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from pathlib import Path\nROOT = Path(__file__).resolve().parents[2]\n")
    assert _layout_lookups(planted) == ["planted.py:2: Path(__file__).resolve().parents"]


def test_importing_the_plugin_and_the_cli_reads_no_file_of_the_harness() -> None:
    """Only Python's own imports open files: no lock, profile, suite or agent source."""
    script = (
        "import sys, json\n"
        "opened = []\n"
        "sys.addaudithook(lambda event, args: opened.append(str(args[0])) "
        "if event == 'open' and isinstance(args[0], str) else None)\n"
        "import harness.pytest_plugin, harness.cli.main\n"
        "print(json.dumps(opened))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    read = [
        path
        for path in json.loads(out.splitlines()[-1])
        if not path.endswith((".py", ".pyc", ".so", ".pth"))
        and "site-packages" not in path
        and not path.startswith(sys.base_prefix)
    ]
    assert not read, read


def test_the_checkout_serves_the_shipped_folders() -> None:
    top = shipped.checkout()
    assert top == PACKAGE.parent
    assert (shipped.agent_dir() / "executorch-sdk.lock").is_file()
    assert (shipped.devices_dir() / "host.yaml").is_file()
    assert (shipped.suites_dir() / "test_dispatch.py").is_file()
    assert (shipped.maps_dir() / "sample.yaml").is_file()


def test_a_project_profile_comes_first_and_every_name_says_where_it_comes_from(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / "devices").mkdir(parents=True)
    (project / "lab").mkdir()
    (project / "pytest.ini").write_text("[pytest]\net_devices_dirs = lab\n")
    (project / "devices" / "mine.yaml").write_text("transport: {kind: local}\n")
    (project / "lab" / "host.yaml").write_text("description: ours\ntransport: {kind: local}\n")
    folders = with_built_in(of_working_directory(project / "devices"))
    assert [folder.origin for folder in folders] == [
        "et_devices_dirs in pytest.ini",
        "the project's devices/",
        "built-in",
    ]
    found = {entry.name: entry for entry in listing(folders)}
    assert found["host"].path == project / "lab" / "host.yaml"  # the project's stands in
    assert found["mine"].folder.origin == "the project's devices/"
    assert found["ssh-emu"].folder.origin == "built-in"
    (profile,) = select_profiles("host", folders)
    assert profile.description == "ours"
    assert [p.name for p in select_profiles("mine,ssh-emu", folders)] == ["mine", "ssh-emu"]


def test_a_pyproject_names_the_folders_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\net_devices_dirs = ["boards"]\n'
    )
    with pytest.raises(ProfileError) as missing:  # a typo would hide its profiles
        of_working_directory(tmp_path)
    assert str(missing.value) == (
        f"{tmp_path / 'pyproject.toml'}: et_devices_dirs: {tmp_path / 'boards'} is not a "
        "folder; create it, or correct or drop the entry"
    )
    (tmp_path / "boards").mkdir()
    assert of_working_directory(tmp_path) == of_project(
        tmp_path, tmp_path / "pyproject.toml", ["boards"]
    )
    assert of_project(tmp_path, tmp_path / "pyproject.toml", ["boards"])[0] == DeviceFolder(
        tmp_path / "boards", "et_devices_dirs in pyproject.toml"
    )


def test_an_unknown_name_lists_every_folder_looked_in(tmp_path: Path) -> None:
    (tmp_path / "devices").mkdir()
    folders = with_built_in(of_project(tmp_path, None, []))
    with pytest.raises(DeviceSelectionError, match=rf"no nosuch.yaml in {tmp_path}/devices, "):
        select_profiles("nosuch", folders)


def test_readmes_run_in_the_example_project_leaves_the_checkout_clean(tmp_path: Path) -> None:
    """README runs pytest in examples/user-project: the run's results/ folder there is
    ignored by git (the example's own .gitignore, which a copy of it keeps)."""
    project = PACKAGE.parent / "examples" / "user-project"
    repo = tmp_path / "repo"  # the example's .gitignore at its place in a repository of its own
    (repo / "examples" / "user-project").mkdir(parents=True)
    shutil.copy2(project / ".gitignore", repo / "examples" / "user-project" / ".gitignore")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    written = "examples/user-project/results/20261206-000000-1/results.jsonl"
    done = subprocess.run(["git", "check-ignore", "-q", written], cwd=repo, check=False)
    assert done.returncode == 0, f"{written} is not ignored: git status shows a run's results"
