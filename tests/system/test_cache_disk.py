"""The harness's own disk in trouble (issue #37, fault 1) and its history kept apart from
the cache (fault 4).

A real tmpfs of 2 MiB, mounted in the test's directory and unmounted after it, is the
harness cache: too small for the SDK, or filled or made read-only before a write.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from prerequisites import require
from run_environment import run_environment

from harness.history.live import LiveHistory
from harness.history.target import default_store, store_target
from harness.lifecycle.disk import DiskTrouble
from harness.programs.flatc import cached_program
from harness.transport.local import LocalTransport

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 2 MiB tmpfs at ``tmp_path/cache``, the harness cache; unmounted afterwards."""
    require("mount", "umount", root=True)
    place = tmp_path / "cache"
    place.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(place)], check=True)
    monkeypatch.setenv("ET_HARNESS_CACHE", str(place))
    try:
        yield place
    finally:
        subprocess.run(["umount", "-l", str(place)], check=True)


def _dispatch_suite_on_host(tmp_path: Path) -> tuple[list[str], str]:
    """``pytest suites/test_dispatch.py --device host``: each test's outcome, the output."""
    env = run_environment(ET_HARNESS_HISTORY="off", PYTHONPATH=str(REPO))
    results = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "test_dispatch.py"), "-q",
         "-p", "no:cacheprovider", "--device", "host", "--results-dir", str(results)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = run.stdout + run.stderr
    records = (results / "results.jsonl").read_text().splitlines()
    return [json.loads(line)["outcome"] for line in records], output


def test_a_cache_too_small_for_the_sdk_is_one_line_once_and_every_test_is_infra(
    small_cache, tmp_path
):
    outcomes, output = _dispatch_suite_on_host(tmp_path)
    assert len(outcomes) > 20 and set(outcomes) == {"infra"}, output
    line = (
        f"DiskTrouble: {small_cache}/sdk: no space left on the device (fetching the "
        "ExecuTorch SDK needs about 64.0 MB there, "
    )
    assert output.count(line) == 1, output  # once for the device, in its quarantine
    assert "free space there, or point ET_HARNESS_CACHE at a folder with room" in output
    assert "Traceback" not in output and "pip" not in output, output
    left = [p.suffix for p in (small_cache / "sdk").iterdir()]
    assert left == [".lock"]  # nothing half-fetched left behind


def test_a_full_cache_is_one_line_for_the_device_from_its_first_write(small_cache, tmp_path):
    filler = os.open(small_cache / "filler", os.O_WRONLY | os.O_CREAT)
    with contextlib.suppress(OSError):
        while True:
            os.write(filler, b"x" * 65536)
    os.close(filler)

    outcomes, output = _dispatch_suite_on_host(tmp_path)

    assert len(outcomes) > 20 and set(outcomes) == {"infra"}, output
    line = f"DiskTrouble: {small_cache}/locks: no space left on the device (taking the lock"
    assert output.count(line) == 2, output  # the first test's, and the device's quarantine
    assert f"INFRA {len(outcomes) - 1} test(s) on host not started" in output
    assert "Traceback" not in output, output


def test_a_cache_filled_or_made_read_only_mid_write_names_the_folder(small_cache):
    filler = small_cache / "filler"
    with pytest.raises(DiskTrouble) as full:
        with open(filler, "wb") as sink:
            sink.write(b"x" * (1 << 20))
            cached_program("probe", ["big"], lambda: b"y" * (2 << 20))
    message = str(full.value)
    assert message.startswith(f"{small_cache}/programs: no space left on the device (writing ")
    assert message.endswith("free space there, or point ET_HARNESS_CACHE at a folder with room")
    left = sorted(p.suffix for p in (small_cache / "programs").iterdir())
    assert left == [".lock"]  # no partial program, no record of one

    filler.unlink()
    work = small_cache / "host-work"
    work.mkdir(mode=0o700)
    transport = LocalTransport(str(work))
    program = cached_program("probe", ["small"], lambda: b"z" * 1000)
    subprocess.run(["mount", "-o", "remount,ro", str(small_cache)], check=True)
    with pytest.raises(
        DiskTrouble, match=f"^{work}: the file system is read-only \\(copying"
    ) as ro:
        transport.push(program, str(work / program.name))
    assert str(ro.value).endswith(
        ": make it writable, or point ET_HARNESS_CACHE at a writable folder"
    )


def test_the_history_lives_apart_from_the_cache_and_outlives_it(tmp_path, monkeypatch, capsys):
    cache, data = tmp_path / "cache", tmp_path / "data"
    monkeypatch.setenv("ET_HARNESS_CACHE", str(cache))
    monkeypatch.delenv("ET_HARNESS_HISTORY", raising=False)
    monkeypatch.delenv("ET_HARNESS_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    cache.mkdir()
    old = cache / "history.sqlite"  # where an older harness kept it
    with sqlite3.connect(old) as db:
        db.execute("create table runs (name text)")
        db.execute("insert into runs values ('nightly-1')")
    db.close()

    assert store_target(None) == str(data / "et-harness" / "history.sqlite")
    assert capsys.readouterr().err == (
        f"history: moved {old} to {data}/et-harness/history.sqlite (the cache may be "
        "deleted; the history is data)\n"
    )
    assert default_store() == data / "et-harness" / "history.sqlite"  # once: nothing more
    assert capsys.readouterr().err == ""

    shutil.rmtree(cache)  # what people do to free space or mend a build
    with sqlite3.connect(store_target(None)) as db:
        assert db.execute("select name from runs").fetchall() == [("nightly-1",)]
    db.close()
    monkeypatch.setenv("ET_HARNESS_DATA", str(tmp_path / "mine"))
    assert store_target(None) == str(tmp_path / "mine" / "history.sqlite")


def test_a_history_that_cannot_leave_the_cache_names_the_data_folder(tmp_path, monkeypatch):
    """The data folder, read-only: the move of an older history out of the cache is one
    line naming it and ET_HARNESS_DATA, the same from the plugin (no option named it)."""
    require("mount", "umount", root=True)
    cache, data = tmp_path / "cache", tmp_path / "data"
    cache.mkdir()
    data.mkdir()
    (cache / "history.sqlite").write_bytes(b"")  # where an older harness kept it
    monkeypatch.setenv("ET_HARNESS_CACHE", str(cache))
    monkeypatch.setenv("ET_HARNESS_DATA", str(data))
    monkeypatch.delenv("ET_HARNESS_HISTORY", raising=False)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(data)], check=True)
    try:
        with pytest.raises(DiskTrouble) as read_only:
            store_target(None)
        options = SimpleNamespace(getoption={"history": None}.get)
        with pytest.raises(pytest.UsageError) as in_pytest:
            LiveHistory.of(options)  # type: ignore[arg-type]
    finally:
        subprocess.run(["umount", "-l", str(data)], check=True)
    message = str(read_only.value)
    assert message.startswith(f"{data}: the file system is read-only (moving the run history")
    assert message.endswith(": make it writable, or point ET_HARNESS_DATA at a writable folder")
    assert str(in_pytest.value) == message


WORK_CASES = """\
import os

import pytest

DISK = {disk!r}


@pytest.mark.parametrize("n", range(6))
def test_push(device, tmp_path, n):
    if n == 2:  # the work folder's disk fills up mid-run
        filler = os.open(os.path.join(DISK, "filler"), os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(filler, b"x" * 65536)
        except OSError:
            pass
        os.close(filler)
    program = tmp_path / "p.pte"
    program.write_bytes(bytes([n]) * 200_000)
    device.push_program(program)
"""


@pytest.fixture
def work_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs at ``tmp_path/work``: room for the agent, little more."""
    require("mount", "umount", root=True)
    place = tmp_path / "work"
    place.mkdir(mode=0o700)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(place)], check=True
    )
    try:
        yield place
    finally:
        subprocess.run(["umount", "-l", str(place)], check=True)


def test_a_work_folder_that_fills_mid_run_is_one_line_and_the_rest_infra(work_disk, tmp_path):
    devices = tmp_path / "devices"
    devices.mkdir()
    (devices / "small.yaml").write_text(
        f"name: small\ntransport: {{kind: local}}\nwork_dir: {work_disk}\n", "utf-8"
    )
    (tmp_path / "test_cases.py").write_text(WORK_CASES.format(disk=str(work_disk)), "utf-8")
    env = run_environment(ET_HARNESS_HISTORY="off", PYTHONPATH=str(REPO))
    results = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "test_cases.py", "-q", "-p", "no:cacheprovider",
         "--devices-dir", str(devices), "--device", "small", "--results-dir", str(results),
         "--lock-dir", str(tmp_path / "locks")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = run.stdout + run.stderr
    outcomes = [
        json.loads(line)["outcome"] for line in (results / "results.jsonl").read_text().splitlines()
    ]
    assert outcomes == ["passed", "passed", "infra", "infra", "infra", "infra"], output
    line = f"DiskTrouble: {work_disk}/programs: no space left on the device (copying p.pte"
    assert output.count(line) == 2, output  # the test's own line, and the quarantine's
    assert "give the device a work_dir in a folder with room" in output
    assert "INFRA 3 test(s) on small not started: the device is quarantined" in output
    assert "Traceback" not in output, output


def test_a_tools_words_for_a_full_or_read_only_disk_are_read():
    import errno

    from harness.lifecycle.disk import said_in

    pip = "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device"
    assert said_in(pip) == errno.ENOSPC
    assert said_in("ld: final link failed: Read-only file system") == errno.EROFS
    assert said_in("cc1plus: error: Disk quota exceeded") == errno.EDQUOT
    assert said_in("error: 'foo' was not declared in this scope") is None
