"""The ExecuTorch SDK taken from the pinned executorch wheel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.lifecycle.cache import cache_root
from harness.runtime import wheel_sdk as sdk
from harness.runtime.wheel_sdk import (
    SdkDownloadFailed,
    UnsupportedAbi,
    VersionNotLocked,
    default_version,
    ensure_sdk,
    lock_file,
    locked_versions,
    sdk_dir,
)


def test_lock_pins_1_5_1_first_and_1_5_0_each_for_both_wheels() -> None:
    text = lock_file().read_text()
    assert re.findall(r"^executorch==(\S+)", text, re.MULTILINE) == list(locked_versions())
    assert locked_versions() == ("1.5.1", "1.5.0") and default_version() == "1.5.1"
    for version in locked_versions():  # one hash per platform wheel
        block = text.split(f"executorch=={version} \\\n", 1)[1].split("executorch==", 1)[0]
        assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", block)) == len(sdk.WHEEL_PLATFORMS)
    assert sdk_dir("x86_64", "1.5.0") != sdk_dir("x86_64", "1.5.1")
    with pytest.raises(
        VersionNotLocked,
        match=r"no executorch 1\.4\.9 wheel is pinned .* "
        r"\(pinned: 1\.5\.1, 1\.5\.0\)",
    ):
        ensure_sdk("x86_64", "1.4.9")


def test_host_sdk_has_the_parts_the_agent_needs() -> None:
    paths = ensure_sdk("x86_64")
    assert paths.version == default_version() and paths.abi == "x86_64"
    assert (paths.include / "executorch/runtime/backend/backend_options_map.h").is_file()
    assert (paths.include / "executorch/runtime/core/portable_type/c10").is_dir()
    for name in (
        "libexecutorch.so",
        "libexecutorch_backend_xnnpack.so",
        "libexecutorch_threadpool.so",
    ):
        assert (paths.lib / name).is_file(), name
    assert (paths.cmake_dir / "executorch-config.cmake").is_file()
    assert (paths.schema / "program.fbs").is_file() and (paths.schema / "scalar_type.fbs").is_file()
    version = subprocess.run(
        [str(paths.flatc), "--version"], capture_output=True, text=True, timeout=30
    )
    assert version.returncode == 0 and version.stdout.startswith("flatc version")
    # Only the C++ SDK is kept, not the wheel's Python package.
    assert not (paths.root / "exir").exists()


def test_second_call_reuses_the_cache() -> None:
    first = ensure_sdk("x86_64")
    stamp = first.lib.joinpath("libexecutorch.so").stat().st_mtime_ns
    assert ensure_sdk("x86_64") == first
    assert first.lib.joinpath("libexecutorch.so").stat().st_mtime_ns == stamp


def test_unknown_abi_is_refused() -> None:
    with pytest.raises(UnsupportedAbi, match="armv7m"):
        ensure_sdk("armv7m")


def test_cache_root_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ET_HARNESS_CACHE", str(tmp_path))
    assert cache_root() == tmp_path
    assert sdk_dir("aarch64").parent == tmp_path / "sdk"
    assert sdk_dir("aarch64").name.startswith(f"executorch-{default_version()}-aarch64")
    monkeypatch.delenv("ET_HARNESS_CACHE")
    assert cache_root() == Path.home() / ".cache" / "et-harness"


def _pip_env(tmp_path: Path, index_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        ET_HARNESS_CACHE=str(tmp_path / "cache"),
        PIP_INDEX_URL=index_url,
        PIP_NO_CACHE_DIR="1",
        PIP_RETRIES="0",
        PIP_TIMEOUT="5",
    )
    return env


def test_pip_failure_says_what_to_run(tmp_path: Path) -> None:
    # Port 9 on loopback: nothing listens, so pip fails at once.
    code = (
        "from harness.runtime.wheel_sdk import ensure_sdk, SdkDownloadFailed\n"
        "try:\n    ensure_sdk('x86_64')\n"
        "except SdkDownloadFailed as exc:\n    print(exc)\n    raise SystemExit(3)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=_pip_env(tmp_path, "http://127.0.0.1:9/simple"),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert "pip download --no-deps --only-binary=:all:" in result.stdout
    assert "--require-hashes" in result.stdout and "manylinux_2_28_x86_64" in result.stdout
    assert not (tmp_path / "cache" / "sdk" / sdk_dir("x86_64").name).exists()
    assert SdkDownloadFailed.__mro__[1] is sdk.SdkError


def test_parallel_first_use_extracts_once(tmp_path: Path) -> None:
    """Two processes race on an empty cache; both get the same complete SDK."""
    env = {k: v for k, v in os.environ.items() if k != "ET_HARNESS_CACHE"}
    env["ET_HARNESS_CACHE"] = str(tmp_path / "cache")
    code = "from harness.runtime.wheel_sdk import ensure_sdk; print(ensure_sdk('x86_64').root)"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    roots = {p.communicate(timeout=300)[0].strip() for p in procs}
    assert [p.returncode for p in procs] == [0, 0]
    (root,) = roots
    assert (Path(root) / "lib" / "libexecutorch.so").is_file()
    leftovers = [p.name for p in (tmp_path / "cache" / "sdk").iterdir() if p.name.startswith(".")]
    assert leftovers == []
