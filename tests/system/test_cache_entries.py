"""Cached builds check, repair and bound themselves (issue #37, faults 2 and 3; #36, item 3).

Each test works in a cache of its own (``ET_HARNESS_CACHE``): the shared one is only read,
to copy a built agent or firmware from, so that a damaged entry here never reaches
another test (a rebuild compiles through the run's one object cache, ccache's, which is
safe for concurrent use: tests/conftest.py). A copy keeps its files' modification times,
so it is intact as it was.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.cli.main import main as cli
from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import (
    LIMIT_ENV,
    CacheEntry,
    CacheLimitError,
    EntryInfo,
    entries,
    size_limit,
)
from harness.programs.flatc import cached_program
from harness.runtime.agent_build import ensure_agent
from harness.runtime.wheel_sdk import sdk_dir
from harness.transport.local import LocalTransport

REPO = Path(__file__).resolve().parents[2]
SHARED_CACHE = cache_root()  # the one the other tests share, before a test points elsewhere


@pytest.fixture(scope="module")
def shared_agent() -> Path:
    """The x86_64 agent's entry in the shared cache (built once, by whichever test first)."""
    return ensure_agent("x86_64").dist_dir.parent


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("ET_HARNESS_CACHE", str(root))
    return root


def _copy_entry(entry: Path, into: Path) -> Path:
    """``entry`` and its record copied to the same place under the cache ``into``."""
    target = into / entry.parent.name / entry.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(entry, target, symlinks=True)
    shutil.copy2(f"{entry}.entry", f"{target}.entry")
    return target


def _truncate(path: Path) -> int:
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)
    return size


def _program(n: int, size: int = 1000) -> bytes:
    return bytes([n % 256]) * size


def test_a_damaged_program_is_found_and_made_again_with_one_line(own_cache, capfd):
    made = []

    def generate() -> bytes:
        made.append(1)
        return _program(7)

    path = cached_program("probe", ["A"], generate)
    assert cached_program("probe", ["A"], generate) == path and len(made) == 1
    assert CacheEntry("program", path).damage() is None

    _truncate(path)
    # This process holds it already; a new run is another process: the check is its.
    assert _fresh_process_finds(path) == "damaged"
    capfd.readouterr()
    entry = CacheEntry("program", path)
    with entry.building() as intact:
        assert not intact
    lines = [line for line in capfd.readouterr().err.splitlines() if line]
    assert lines == [
        f"cache: {path} is damaged (. has 500 bytes, 1000 when it was made); removing it "
        "and making it again"
    ]
    assert not path.exists()

    # Same size, other content (its modification time moved): the hash says so.
    path = cached_program("probe", ["B"], lambda: _program(8))
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    time.sleep(0.01)
    path.write_bytes(bytes(data))
    assert "other content" in (CacheEntry("program", path).damage() or "")


def _fresh_process_finds(path: Path) -> str:
    code = textwrap.dedent(f"""
        from pathlib import Path
        from harness.lifecycle.cache_entry import CacheEntry
        print("intact" if CacheEntry("program", Path({str(path)!r})).use() else "damaged")
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    return done.stdout.strip()


@pytest.mark.slow
def test_a_truncated_cached_agent_is_rebuilt_and_runs(shared_agent, own_cache, capfd):
    """As an interrupted copy or a bad disk leaves it: ``complete`` marker still there."""
    _copy_entry(_shared(sdk_dir), own_cache)
    agent = _copy_entry(shared_agent, own_cache)
    binary = agent / "dist" / "et-agent"
    size = _truncate(binary)
    assert (agent / "complete").is_file()
    capfd.readouterr()

    build = ensure_agent("x86_64")

    err = capfd.readouterr().err
    assert f"cache: {agent} is damaged (dist/et-agent has {size // 2} bytes, {size} when" in err
    assert build.binary == binary and binary.stat().st_size > size // 2
    assert CacheEntry("agent", agent).damage() is None
    from harness.profiles.device_profile import load_profile
    from harness.runner import open_runner

    device, runner = open_runner(load_profile("host"))
    try:
        assert runner.hello.fact("agent_version") is not None  # the rebuilt agent answers
    finally:
        runner.close()
        device.close()


def _shared(directory_of: Callable[[str], Path]) -> Path:
    """Where ``directory_of("x86_64")`` is in the shared cache."""
    saved = os.environ["ET_HARNESS_CACHE"]
    os.environ["ET_HARNESS_CACHE"] = str(SHARED_CACHE)
    try:
        return directory_of("x86_64")
    finally:
        os.environ["ET_HARNESS_CACHE"] = saved


@pytest.mark.slow
def test_a_truncated_cached_firmware_is_rebuilt(own_cache, capfd):
    from harness.emulators.mcu import FIRMWARE_NAME, build_firmware, firmware_size

    shared = _shared(lambda _: build_firmware(cache_dir=cache_root() / "mcu-firmware")).parent
    firmware = _copy_entry(shared, own_cache)
    size = _truncate(firmware / FIRMWARE_NAME)
    capfd.readouterr()

    elf = build_firmware(cache_dir=own_cache / firmware.parent.name)

    assert elf == firmware / FIRMWARE_NAME
    err = capfd.readouterr().err
    assert f"{FIRMWARE_NAME} has {size // 2} bytes, {size} when it was made" in err
    # Made again (its debug information names the folder it was built in, so its size
    # may differ by a few bytes), recorded and whole.
    assert CacheEntry("firmware", firmware).damage() is None
    assert elf.stat().st_size > size // 2 and firmware_size(elf)["text"] > 0


MAKER = """
from harness.programs.flatc import cached_program
for n in range(6):
    print(cached_program("probe", [n], lambda n=n: bytes([n]) * 10_000))
"""
HOLDER = """
import sys
from pathlib import Path
from harness.lifecycle.cache_entry import CacheEntry
assert CacheEntry("program", Path(sys.argv[1])).use()
print("holding", flush=True)
sys.stdin.read()  # until the test closes it
"""


@pytest.fixture
def holder(own_cache: Path) -> Iterator[Callable[[Path], None]]:
    started: list[subprocess.Popen[str]] = []

    def hold(path: Path) -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "holding\n"

    yield hold
    for process in started:
        process.communicate(timeout=30)


def test_a_commit_trims_once_a_hundredth_of_the_bound_was_committed_since_the_last_trim(
    own_cache, monkeypatch
):
    """A trim reads every entry's record: a run committing dozens of small programs into a
    big cache trimmed after each one. The count of bytes since the last trim is shared by
    every process through the cache."""
    from harness.lifecycle import cache_entry

    trims: list[list[EntryInfo]] = []
    real = cache_entry.trim

    def counted() -> list[EntryInfo]:
        trims.append(real())
        return trims[-1]

    monkeypatch.setattr(cache_entry, "trim", counted)
    monkeypatch.setenv(LIMIT_ENV, "1M")  # a hundredth: 10,485 bytes
    for n in range(4):  # programs of 4,000 bytes
        cached_program("probe", [f"p{n}"], functools.partial(_program, n, 4_000))
    assert len(trims) == 1  # the third passed 10,485 bytes; the fourth starts the count again
    assert (own_cache / "added-since-trim").read_text() == "4000"


def test_a_cache_past_its_bound_loses_its_least_recently_used_but_never_a_held_one(
    own_cache, holder, monkeypatch, capsys
):
    made = subprocess.run(  # by an earlier run, which has ended: nobody holds them
        [sys.executable, "-c", MAKER], capture_output=True, text=True, check=True, cwd=REPO
    )
    paths = [Path(line) for line in made.stdout.splitlines()]
    for n, path in enumerate(paths):
        os.utime(f"{path}.entry", (1000 + n, 1000 + n))  # used in this order
    holder(paths[0])  # the oldest, held by another run
    os.utime(f"{paths[0]}.entry", (1000, 1000))  # its use just now is not counted here
    monkeypatch.setenv(LIMIT_ENV, "45k")
    assert size_limit() == 45 * 1024

    newest = cached_program("probe", ["new"], lambda: _program(9, 10_000))  # commits: trims

    # 70 kB: the three least recently used that nobody holds go, the held oldest stays.
    assert [e.path for e in entries()] == [paths[0], paths[4], paths[5], newest]
    assert not any(p.exists() or Path(f"{p}.entry").exists() for p in paths[1:4])

    assert cli(["cache"]) == 0  # the answer: the totals per kind, no entry
    head, *kinds, hint = capsys.readouterr().out.splitlines()
    assert head.endswith(": 4 entries, 39.1 kB (bound 45.0 kB, $ET_HARNESS_CACHE_LIMIT)")
    assert [row.split()[:5] for row in kinds] == [["program", "4", "entries", "39.1", "kB"]]
    assert hint == "every entry: et-harness cache --all"
    assert cli(["cache", "--all"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[1:3] == [*kinds, "every entry, the most recently used first:"]
    rows = [line.split() for line in listing[3:]]
    assert [row[-1] for row in rows] == [
        str(p.relative_to(own_cache)) for p in (newest, paths[5], paths[4], paths[0])
    ]  # the most recently used first
    assert all(row[:3] == ["program", "9.8", "kB"] for row in rows)

    assert cli(["cache", "clean", "--kind", "sdk"]) == 0
    assert "removed 0 entries" in capsys.readouterr().out
    assert cli(["cache", "clean"]) == 0
    out = capsys.readouterr().out
    # The other run's and this process's own stay.
    assert "removed 2 entries (19.5 kB)" in out and "2 in use by a running process kept" in out
    assert [e.path for e in entries()] == [paths[0], newest]


def test_the_bound_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, "1.5G")
    assert size_limit() == 3 << 29
    monkeypatch.setenv(LIMIT_ENV, "lots")
    with pytest.raises(CacheLimitError, match="ET_HARNESS_CACHE_LIMIT='lots' is no size"):
        size_limit()
    monkeypatch.setenv(LIMIT_ENV, "9" * 400)  # float() makes it inf: int() raised
    with pytest.raises(CacheLimitError, match=r"='9{37}\.\.\.' is no size a disk has"):
        size_limit()


def test_user_programs_on_a_device_stay_within_their_bound_least_recently_used_first(tmp_path):
    from harness.devices.device_files import keep_bounded

    work = tmp_path / "work"
    programs = work / "programs"
    programs.mkdir(parents=True)
    transport = LocalTransport(str(work))
    paths = []
    for n in range(5):
        path = programs / f"user-{n:016x}.pte"
        path.write_bytes(_program(n, 1000))
        os.utime(path, (1000 + n, 1000 + n))
        paths.append(path)
    (programs / "probe-a.pte").write_bytes(_program(9, 5000))  # the harness's own: not counted

    removed = keep_bounded(transport, str(paths[0]), 2500, timeout=30)  # in use: the oldest

    assert removed == [str(paths[1]), str(paths[2]), str(paths[3])]
    assert sorted(p.name for p in programs.iterdir()) == [
        "probe-a.pte",
        paths[0].name,
        paths[4].name,
    ]
    assert paths[0].stat().st_mtime > 1000 + 5  # marked used now


def test_an_inputs_file_goes_with_its_program(tmp_path):
    """A user program's inputs file (a BundledProgram test case's, ``.pte.inputs``) is
    removed with the program, when the bound evicts it and when a load finds it damaged."""
    from harness.devices.device_files import keep_bounded
    from harness.devices.hosted import HostedDevice
    from harness.profiles.device_profile import load_profile

    work = tmp_path / "work"
    programs = work / "programs"
    programs.mkdir(parents=True)
    paths = []
    for n in range(2):
        path = programs / f"user-{n:016x}.pte"
        path.write_bytes(_program(n, 1000))
        (programs / f"{path.name}.inputs").write_bytes(b"ETBI")
        os.utime(path, (1000 + n, 1000 + n))
        paths.append(path)

    assert keep_bounded(LocalTransport(str(work)), str(paths[1]), 1500, timeout=30) == [
        str(paths[0])
    ]
    assert sorted(p.name for p in programs.iterdir()) == [paths[1].name, f"{paths[1].name}.inputs"]

    device = HostedDevice(load_profile("host"), LocalTransport(str(work)))
    device.forget_program(str(paths[1]))
    assert list(programs.iterdir()) == []


def test_agent_builds_on_a_device_beyond_three_unused_for_a_day_are_removed(tmp_path):
    from harness.devices.device_files import keep_latest

    agents = tmp_path / "work" / "agent"
    agents.mkdir(parents=True)
    now = time.time()
    ages = {"a": 9, "b": 8, "c": 7, "d": 0.5, "e": 0.2, "f": 0}  # days since last use
    for name, days in ages.items():
        (agents / name).mkdir()
        (agents / name / "et-agent").write_bytes(b"x")
        os.utime(agents / name, (now - days * 86400, now - days * 86400))
    transport = LocalTransport(str(tmp_path / "work"))

    removed = keep_latest(transport, str(agents / "a"), 3, timeout=30)  # "a": in use again

    # Beyond the three most recent ("a" now, "f", "e"): "d" was used within a day, stays.
    assert removed == [str(agents / "b"), str(agents / "c")]
    assert sorted(p.name for p in agents.iterdir()) == ["a", "d", "e", "f"]


def test_a_program_a_load_finds_damaged_is_removed_from_the_cache_and_the_device(
    shared_agent, tmp_path
):
    import dataclasses

    from harness.data.options import OptionsMap
    from harness.profiles.device_profile import load_profile
    from harness.programs.probe_program import probe_program
    from harness.runner import open_runner
    from harness.runner.program_check import USER_PROGRAM_KIND

    profile = dataclasses.replace(load_profile("host"), work_dir=str(tmp_path / "work"))
    program = probe_program(("ProbeA", "ProbeB"))
    options = OptionsMap.from_dict({"ProbeA": {"k": 1}})
    device, runner = open_runner(profile)
    try:
        first = runner.check_program(program, options, probes=("ProbeA", "ProbeB"))
        assert first.ok, first.render()
        on_device = next((tmp_path / "work" / "programs").glob("user-*.pte"))
        cached = cache_root() / "programs" / "user" / f"{_sha256(program)}.pte"
        assert CacheEntry(USER_PROGRAM_KIND, cached).use()
        data = on_device.read_bytes()  # damaged on the device behind the harness's back
        on_device.write_bytes(data[:8] + b"\xff" * 24 + data[32:])

        damaged = runner.check_program(program, options, probes=("ProbeA", "ProbeB"))

        assert not damaged.ok
        assert {r.verdict.report.detail for r in damaged.results} == {0x23}, damaged.render()
        assert not on_device.exists() and not cached.exists()  # removed at once
        again = runner.check_program(program, options, probes=("ProbeA", "ProbeB"))
        assert again.ok and on_device.read_bytes() == data
    finally:
        runner.close()
        device.close()


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


RACER = """
import sys, time
from pathlib import Path
from harness.programs.flatc import cached_program
from harness.lifecycle.cache_entry import CacheEntry

def generate():
    Path(sys.argv[1], str(__import__("os").getpid())).write_text("")  # who made it
    time.sleep(0.5)
    return bytes(range(256)) * 40

path = cached_program("probe", ["raced"], generate)
print(path, CacheEntry("program", path).damage())
"""


def test_concurrent_runs_make_an_entry_once_and_all_use_it(own_cache, tmp_path):
    makers = tmp_path / "makers"
    makers.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", RACER, str(makers)]
    racers = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
        for _ in range(4)
    ]
    said = {racer.communicate(timeout=60)[0] for racer in racers}
    assert all(racer.returncode == 0 for racer in racers)
    assert len(said) == 1 and said.pop().endswith(".pte None\n")  # one path, intact for all
    assert len(list(makers.iterdir())) == 1  # made once


def test_an_entry_whose_record_is_damaged_is_made_again(own_cache, capfd):
    made = subprocess.run(  # by an earlier run
        [sys.executable, "-c", MAKER], capture_output=True, text=True, check=True, cwd=REPO
    )
    path = Path(made.stdout.splitlines()[0])
    Path(f"{path}.entry").write_text("{not json", "utf-8")
    capfd.readouterr()
    again: list[int] = []

    def generate() -> bytes:
        again.append(1)
        return _program(0, 10_000)

    cached_program("probe", [0], generate)
    assert again == [1] and CacheEntry("program", path).damage() is None
    assert "cannot be read" in capfd.readouterr().err
