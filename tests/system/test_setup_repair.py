"""``ci/setup.sh`` repairs what an interrupted run left: a ``.venv`` without pip, and a
half-downloaded SDK in the cache (a truncated wheel in a fetch's staging directory, a
half-extracted tree).

The interrupted state is made as an interrupted run leaves it (a venv whose ensurepip
never ran, a truncated wheel beside its target), then the real ``ci/setup.sh`` runs in a
copy of the repository with its own ``ET_HARNESS_CACHE``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import filelock
import pytest

from harness.runtime.wheel_sdk import default_version, repair_sdk_cache

ROOT = Path(__file__).resolve().parents[2]
REVISION = "r2"


def sdk_tree(root: Path, complete: bool) -> Path:
    """An SDK tree as a fetch extracts it: every part _is_complete looks for, or only some."""
    parts = ["lib/libexecutorch.so", "schema/program.fbs"]
    if complete:
        parts += [
            "share/cmake/executorch-config.cmake",
            "data/bin/flatc",
            "backends/xnnpack/serialization/schema.fbs",
        ]
    for part in parts:
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        (root / part).write_bytes(b"\x7fELF" if part.endswith(".so") else b"x")
    return root


def interrupted_cache(cache: Path) -> dict[str, Path]:
    """A cache as interrupted fetches leave it, and what must survive the repair."""
    sdk = cache / "sdk"
    x86 = f"executorch-{default_version()}-x86_64-{REVISION}"
    arm = f"executorch-{default_version()}-aarch64-{REVISION}"
    staging = sdk / f".{x86}.k3j2l1" / "wheel"
    staging.mkdir(parents=True)
    wheel = staging / f"executorch-{default_version()}-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"PK\x03\x04" + b"\0" * 1000)  # the first KB of a 100 MB download
    return {
        "staging": staging.parent,
        "half-extracted": sdk_tree(sdk / arm, complete=False),
        "complete": sdk_tree(sdk / x86, complete=True),
        "older layout": sdk_tree(sdk / f"executorch-{default_version()}-aarch64-r1", False),
    }


def test_the_repair_removes_leftovers_keeps_complete_trees_and_fetches_in_progress(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("ET_HARNESS_CACHE", str(tmp_path))
    paths = interrupted_cache(tmp_path)
    arm_lock = tmp_path / "sdk" / f"{paths['half-extracted'].name}.lock"
    with filelock.FileLock(str(arm_lock)):  # another process fetches aarch64 right now
        assert repair_sdk_cache() == [paths["staging"]]
    assert paths["half-extracted"].exists()
    assert repair_sdk_cache() == [paths["half-extracted"]]
    assert paths["complete"].exists() and paths["older layout"].exists()
    assert repair_sdk_cache() == []


def repository_copy(dest: Path) -> Path:
    """The tracked files of this checkout, as a fresh clone has them."""
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.mark.slow
def test_setup_after_an_interrupted_run_repairs_the_venv_and_the_sdk_cache(tmp_path):
    repo = repository_copy(tmp_path / "repo")
    venv = repo / ".venv"
    subprocess.run(
        ["python3", "-m", "venv", "--without-pip", str(venv)], check=True
    )  # as left by a run killed before the venv's ensurepip
    assert (
        subprocess.run(
            [venv / "bin/python", "-m", "pip", "--version"], capture_output=True
        ).returncode
        != 0
    )
    cache = tmp_path / "cache"
    paths = interrupted_cache(cache)
    env = {**os.environ, "ET_HARNESS_CACHE": str(cache)}
    done = subprocess.run(
        ["bash", "ci/setup.sh"], cwd=repo, env=env, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert ".venv has no working pip (left by an interrupted run)" in done.stdout
    assert f"removed {paths['staging']}: left by an interrupted SDK fetch" in done.stdout
    assert f"removed {paths['half-extracted']}" in done.stdout
    assert not paths["staging"].exists() and not paths["half-extracted"].exists()
    assert paths["complete"].exists() and paths["older layout"].exists()
    assert (
        subprocess.run(
            [venv / "bin/et-harness", "--help"], capture_output=True, timeout=60
        ).returncode
        == 0
    )
