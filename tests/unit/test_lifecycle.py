"""harness.lifecycle: clean child signal state, group kills, ownership records, the sweep.

The end-to-end proofs (killed pytest runs and ``et-harness emu``) are in
tests/system/test_kill_runs.py; these check the parts on their own, in a private state dir.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.lifecycle import owner
from harness.lifecycle.process import ManagedProcess, run
from harness.lifecycle.reap import (
    MARKER_VARIABLE,
    OwnerRecord,
    RecordedProcess,
    boot_id,
    start_time,
)
from harness.lifecycle.stderr_tail import MAX_LINE_BYTES, TAIL_LINES, StderrTail


def _signal_bits(status: str, field: str) -> int:
    line = next(line for line in status.splitlines() if line.startswith(field + ":"))
    return int(line.split()[1], 16)


def _has(bits: int, signum: int) -> bool:
    return bool(bits & (1 << (signum - 1)))


def test_children_start_with_nothing_blocked_or_ignored_and_carry_the_marker() -> None:
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        done = run(["sh", "-c", "cat /proc/self/status; env"], timeout=10)
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    text = done.stdout.decode()
    for field in ("SigBlk", "SigIgn"):
        bits = _signal_bits(text, field)
        assert not _has(bits, signal.SIGTERM) and not _has(bits, signal.SIGINT), field
    assert f"{MARKER_VARIABLE}={owner.current().name}" in text


def test_a_child_leads_its_own_session() -> None:
    done = run(["sh", "-c", "cut -d' ' -f6 /proc/$$/stat; echo $$"], timeout=10)
    session, pid = done.stdout.split()
    assert session == pid and int(session) != os.getsid(0)


def test_no_python_code_runs_in_a_child_between_fork_and_exec(tmp_path: Path) -> None:
    """A process with a gRPC client's threads (a lab run's labgrid session) crashed in a
    child's at-fork hooks (threading._after_fork), which ``preexec_fn`` makes CPython run.
    Here an at-fork hook reports every child that runs Python before exec: none may,
    whether started by run, by a ManagedProcess or as an owner's janitor."""
    script = (
        "import os, pathlib, sys\n"
        "read_end, write_end = os.pipe()\n"
        "os.register_at_fork(after_in_child=lambda: os.write(write_end, b'!'))\n"
        "from harness.lifecycle import owner\n"
        "from harness.lifecycle.process import ManagedProcess, run\n"
        "run(['true'], timeout=10)\n"
        "ManagedProcess(['sh', '-c', 'exit 0'], name='sh').stop(terminate=False)\n"
        f"other = owner.Owner(pathlib.Path({str(tmp_path / 'owners')!r}))\n"
        "os.close(other._janitor_pipe)\n"
        "os.set_blocking(read_end, False)\n"
        "try:\n"
        "    print(len(os.read(read_end, 100)))\n"
        "except BlockingIOError:\n"
        "    print(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"], f"children ran Python after the fork: {done.stdout}"


def test_a_program_whose_path_holds_an_equals_sign_starts_with_its_arguments(
    tmp_path: Path,
) -> None:
    """env, which resets the child's signal state, reads a first word with "=" as a
    variable: such a program is started all the same, with a clean signal state."""
    program = tmp_path / "a=b" / "show"
    program.parent.mkdir()
    program.write_text('#!/bin/sh\necho "$1|$2"; grep -E "^Sig(Blk|Ign)" /proc/self/status\n')
    program.chmod(0o755)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        done = run([str(program), "x y", "$HOME"], timeout=10)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    first, *fields = done.stdout.decode().splitlines()
    assert first == "x y|$HOME"
    for line in fields:
        assert not _has(int(line.split()[1], 16), signal.SIGTERM), line


def test_a_program_that_cannot_be_started_raises_what_popen_raises(tmp_path: Path) -> None:
    """Not an exit status 127 or 126 from env, which starts the program."""
    with pytest.raises(FileNotFoundError, match="no-such-program"):
        run(["no-such-program-of-the-harness"], timeout=10)
    (tmp_path / "data").write_text("not a program")
    with pytest.raises(PermissionError):
        run(["./data"], timeout=10, cwd=tmp_path)  # looked up in cwd, as Popen does
    with pytest.raises(FileNotFoundError):
        run(["./data"], timeout=10)


def test_a_timed_out_run_kills_the_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    with pytest.raises(subprocess.TimeoutExpired):
        run(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], timeout=1.0)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while start_time(grandchild) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert start_time(grandchild) is None, "the background sleep outlived the timeout"


def test_stop_terminates_then_kills_and_keeps_the_stderr_tail() -> None:
    stubborn = ManagedProcess(
        ["sh", "-c", "trap '' TERM; echo ready >&2; while :; do sleep 0.05; done"],
        name="stubborn",
    )
    assert stubborn.wait_for_stderr("ready", timeout=10)
    started = time.monotonic()
    code = stubborn.stop(grace=0.5)
    took = time.monotonic() - started
    assert code == -signal.SIGKILL and took < 3, (code, took)
    assert stubborn.stderr_tail() == "ready"
    assert stubborn.pid not in {p.pid for p in _record(owner.current()).processes}


def _record(of: owner.Owner) -> OwnerRecord:
    return OwnerRecord.from_json(of.record_path.read_text())


def test_a_hand_back_is_replaced_in_one_save(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lab run swaps its hand-back when it takes its place: removed, then added, in
    two saves, a run killed in between left a record with none, and its place held."""
    me = owner.current()
    saved: list[tuple[tuple[str, ...], ...]] = []
    real_save = me._save

    def save() -> None:
        saved.append(tuple(me._hand_back))
        real_save()

    monkeypatch.setattr(me, "_save", save)
    me.replace_hand_back([], [["hand-back", "reserving"]])
    me.replace_hand_back([["hand-back", "reserving"]], [["hand-back", "holding"]])
    assert saved == [(("hand-back", "reserving"),), (("hand-back", "holding"),)]
    assert _record(me).hand_back == (("hand-back", "holding"),)
    me.replace_hand_back([["hand-back", "holding"]], [])
    assert _record(me).hand_back == ()


def _write_record(
    directory: Path, name: str, processes: tuple[RecordedProcess, ...], paths: tuple[str, ...]
) -> Path:
    record = OwnerRecord(
        owner=name, pid=1, start=1, boot_id=boot_id(), host=socket.gethostname(),
        processes=processes, paths=paths,
    )  # fmt: skip
    (directory / f"{name}.json").write_text(record.to_json())
    lock = directory / f"{name}.lock"
    lock.touch()
    return lock


def test_the_sweep_reaps_dead_owners_only(tmp_path: Path) -> None:
    directory = tmp_path / "owners"
    directory.mkdir()
    orphans = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    files = [tmp_path / "dead-file", tmp_path / "live-file"]
    for path in files:
        path.write_text("x")

    def recorded(process: subprocess.Popen[bytes]) -> tuple[RecordedProcess, ...]:
        return (RecordedProcess(process.pid, start_time(process.pid) or 0, "sleep"),)

    _write_record(directory, "dead", processes=recorded(orphans[0]), paths=(str(files[0]),))
    live_lock = _write_record(
        directory, "live", processes=recorded(orphans[1]), paths=(str(files[1]),)
    )
    holder = os.open(live_lock, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as a live owner holds it
    try:
        assert owner.sweep(directory) == ["dead"]
        orphans[0].wait(5)
        assert not files[0].exists() and not (directory / "dead.json").exists()
        assert orphans[1].poll() is None and files[1].exists(), "a live run was touched"
    finally:
        os.close(holder)
        for process in orphans:
            process.kill()
            process.wait()


def test_a_record_from_another_host_is_left_alone(tmp_path: Path) -> None:
    directory = tmp_path / "owners"
    directory.mkdir()
    kept = tmp_path / "theirs"
    kept.write_text("x")
    record = OwnerRecord(owner="elsewhere", pid=1, start=1, boot_id="other",
                         host="another-host", paths=(str(kept),))  # fmt: skip
    (directory / "elsewhere.json").write_text(record.to_json())
    (directory / "elsewhere.lock").touch()
    assert owner.sweep(directory) == []
    assert kept.exists()


def test_a_record_without_a_lock_is_reaped_once_its_owner_is_gone(tmp_path: Path) -> None:
    directory = tmp_path / "owners"
    directory.mkdir()
    files = {name: tmp_path / f"{name}-file" for name in ("gone", "alive")}
    for path in files.values():
        path.write_text("x")
    finished = subprocess.Popen(["true"])
    finished.wait()  # reaped: its pid names nobody now
    gone = OwnerRecord(owner="gone", pid=finished.pid, start=1, boot_id=boot_id(),
                       host=socket.gethostname(), paths=(str(files["gone"]),))  # fmt: skip
    (directory / "gone.json").write_text(gone.to_json())
    alive = OwnerRecord(owner="alive", pid=os.getpid(), start=start_time(os.getpid()) or 0,
                        boot_id=boot_id(), host=socket.gethostname(),
                        paths=(str(files["alive"]),))  # fmt: skip
    (directory / "alive.json").write_text(alive.to_json())
    assert owner.sweep(directory) == ["gone"]
    assert not files["gone"].exists() and not (directory / "gone.json").exists()
    assert files["alive"].exists() and (directory / "alive.json").exists()


def test_an_owner_whose_new_lock_a_sweep_unlinks_takes_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "me.lock"
    real_flock = fcntl.flock
    sweeps: list[int] = []

    def flock_after_a_sweep(fd: int, operation: int) -> None:
        if not sweeps:  # a sweep found the file before its owner locked it: unlinked
            sweeps.append(fd)
            path.unlink()
        real_flock(fd, operation)

    monkeypatch.setattr(owner.fcntl, "flock", flock_after_a_sweep)
    fd = owner._hold_lock(path)
    monkeypatch.undo()
    try:
        assert sweeps, "the sweep was not injected"
        assert os.fstat(fd).st_ino == path.stat().st_ino
        other = os.open(path, os.O_RDWR)
        with pytest.raises(BlockingIOError):  # the file at the path is the one held
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(other)
    finally:
        os.close(fd)


def test_the_janitor_reaps_when_its_owner_is_killed(tmp_path: Path) -> None:
    """An owner in a subprocess starts a child and makes a directory, then is SIGKILLed."""
    script = (
        "import sys, pathlib\n"
        "from harness.lifecycle import owner\n"
        "from harness.lifecycle.process import ManagedProcess\n"
        "child = ManagedProcess(['sleep', '120'], name='sleep')\n"
        f"directory = owner.owned_directory('kept-', pathlib.Path({str(tmp_path)!r}))\n"
        "path = directory.__enter__()\n"
        "print(child.pid, path, flush=True)\n"
        "sys.stdin.read()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert process.stdout is not None
    pid_text, path_text = process.stdout.readline().split()
    child, made = int(pid_text), Path(path_text)
    assert start_time(child) is not None and made.is_dir()
    process.kill()
    process.wait()
    deadline = time.monotonic() + 10
    while (start_time(child) is not None or made.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert start_time(child) is None, "the janitor did not end the child"
    assert not made.exists(), "the janitor did not remove the directory"


def test_a_stderr_tail_joins_split_lines_and_bounds_one_without_a_newline() -> None:
    chunks = iter([b"first\nsec", b"ond\r\n", *[b"x" * 1000] * 20, b"\xff end", b""])
    tail = StderrTail(lambda: next(chunks), name="test")
    assert tail.wait_for_end(5)
    lines = tail.text().split("\n")
    assert lines[:2] == ["first", "second"]
    assert len(lines[2]) == MAX_LINE_BYTES and lines[2].endswith("x\ufffd end")
    assert tail.count("second") == 1 and not tail.wait_for("third", 1, 0.1)


def test_a_stderr_tail_shows_the_last_lines() -> None:
    chunks = iter([b"".join(b"line %d\n" % n for n in range(100)), b""])
    tail = StderrTail(lambda: next(chunks), name="test")
    assert tail.wait_for_end(5)
    assert tail.text().split("\n") == [f"line {n}" for n in range(100 - TAIL_LINES, 100)]


def test_an_owner_keeps_its_janitor_without_a_resource_warning(tmp_path: Path) -> None:
    """The janitor outlives its owner on purpose; a ``Popen`` dropped while its process runs
    warned 'subprocess N is still running' in the test that first started a child (at
    interpreter exit Python shows no ResourceWarning unless asked)."""
    script = (
        "import gc, warnings\n"
        "from harness.lifecycle import owner\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    owner.current()\n"
        "    gc.collect()\n"
        "print([str(w.message) for w in caught if w.category is ResourceWarning])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "ET_HARNESS_CACHE": str(tmp_path)},
    )  # fmt: skip
    assert done.stdout == "[]\n", done.stdout
