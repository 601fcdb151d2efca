"""This process as an owner of emulators: its state file, its janitor, and the sweep.

The first time a process starts a child through :mod:`harness.lifecycle.process`
(or registers a namespace or file), it becomes an *owner*:

- it writes ``<state dir>/<owner>.json`` (:class:`~harness.lifecycle.reap.OwnerRecord`:
  its PID and start time, the process groups, network namespaces and files it holds,
  the ports of the adb servers it ran, and commands that hand back what it holds
  elsewhere, such as a labgrid place)
  and holds an exclusive ``flock`` on ``<owner>.lock`` for as long as it lives;
- it starts a janitor (``python -m harness.lifecycle.janitor``) in a session of its
  own, which waits for the end of a pipe only this process holds. When the process
  ends, however it ends, the janitor reaps what the record still names and exits;
- it sweeps the state directory: a record whose lock nobody holds belongs to a run
  whose owner and janitor are both dead (SIGKILLed together, a reboot), and is
  reaped. A held lock means a live run; its record is never touched.

Children carry ``ET_HARNESS_OWNER=<owner>`` in their environment, which also finds
those that left the process group or were started by a child (a daemonised server).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from harness.errors import UsageError
from harness.lifecycle.cache import cache_root
from harness.lifecycle.disk import as_disk_trouble, writing
from harness.lifecycle.reap import (
    MARKER_VARIABLE,
    OwnerRecord,
    RecordedProcess,
    boot_id,
    reap,
    start_time,
)
from harness.lifecycle.signals import with_default_signals


class LifecycleError(RuntimeError, UsageError):
    """The harness cannot keep track of what it starts (its state directory is unusable)."""


def state_dir() -> Path:
    """Where ownership records live: ``$ET_HARNESS_CACHE/owners``."""
    return cache_root() / "owners"


class Owner:
    """This process's record and janitor (use :func:`current`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pid = os.getpid()
        self.name = f"{self.pid}-{secrets.token_hex(4)}"
        self._lock = threading.Lock()
        self._processes: dict[int, RecordedProcess] = {}
        self._netns: list[str] = []
        self._paths: list[str] = []
        self._hand_back: list[tuple[str, ...]] = []
        self._adb_ports: list[int] = []
        self._janitor: subprocess.Popen[bytes] | None = None
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._lock_fd = _hold_lock(directory / f"{self.name}.lock")
            self._save()
        except OSError as exc:
            trouble = as_disk_trouble(exc, directory, "keeping this run's ownership record")
            if trouble is not None:
                raise trouble from None
            raise LifecycleError(
                f"cannot keep an ownership record in {directory}: {exc}; make it writable "
                "or point ET_HARNESS_CACHE at a writable directory"
            ) from None
        self._janitor_pipe, self._janitor = self._start_janitor()
        self._save()
        sweep(directory)

    @property
    def record_path(self) -> Path:
        return self.directory / f"{self.name}.json"

    @property
    def marker(self) -> dict[str, str]:
        """The environment entry every child of this owner carries."""
        return {MARKER_VARIABLE: self.name}

    def add_process(self, pid: int, name: str) -> None:
        start = start_time(pid)
        if start is not None:
            with self._lock:
                self._processes[pid] = RecordedProcess(pid, start, name)
                self._save()

    def remove_process(self, pid: int) -> None:
        with self._lock:
            if self._processes.pop(pid, None) is not None:
                self._save()

    def add_netns(self, name: str) -> None:
        with self._lock:
            self._netns.append(name)
            self._save()

    def remove_netns(self, name: str) -> None:
        with self._lock:
            if name in self._netns:
                self._netns.remove(name)
                self._save()

    def add_path(self, path: Path) -> None:
        with self._lock:
            self._paths.append(str(path))
            self._save()

    def remove_path(self, path: Path) -> None:
        with self._lock:
            if str(path) in self._paths:
                self._paths.remove(str(path))
                self._save()

    def replace_hand_back(self, old: list[list[str]], new: list[list[str]]) -> None:
        """Run the commands ``new`` instead of ``old`` when this process is gone. One save:
        a process killed in between never leaves a record with neither."""
        with self._lock:
            for argv in old:
                if tuple(argv) in self._hand_back:
                    self._hand_back.remove(tuple(argv))
            self._hand_back.extend(tuple(argv) for argv in new)
            self._save()

    def add_adb_port(self, port: int) -> None:
        """Any adb server on ``port`` is ours until this process is gone (an adb client that
        finds none forks one there, outside every process group we lead)."""
        with self._lock:
            if port not in self._adb_ports:
                self._adb_ports.append(port)
                self._save()

    def _save(self) -> None:
        record = OwnerRecord(
            owner=self.name,
            pid=self.pid,
            start=start_time(self.pid) or 0,
            boot_id=boot_id(),
            host=socket.gethostname(),
            processes=tuple(self._processes.values()),
            netns=tuple(self._netns),
            paths=tuple(self._paths),
            janitor=self._janitor.pid if self._janitor is not None else None,
            command=" ".join(sys.argv)[:200],
            hand_back=tuple(self._hand_back),
            adb_ports=tuple(self._adb_ports),
        )
        staging = self.record_path.with_suffix(".tmp")
        staging.write_text(record.to_json())
        os.replace(staging, self.record_path)

    def _start_janitor(self) -> tuple[int, subprocess.Popen[bytes]]:
        """The pipe whose closing tells the janitor this process ended, and the janitor.
        Its ``Popen`` is kept: the janitor outlives this process on purpose, and a
        ``Popen`` dropped while its process runs warns (a ResourceWarning in the run)."""
        read_end, write_end = os.pipe()  # both close-on-exec: no other child gets them
        env = {k: v for k, v in os.environ.items() if k != MARKER_VARIABLE}
        argv = [sys.executable, "-m", "harness.lifecycle.janitor", str(self.directory), self.name]
        try:
            janitor = subprocess.Popen(
                with_default_signals(argv),
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        finally:
            os.close(read_end)
        return write_end, janitor


_current: Owner | None = None
_current_lock = threading.Lock()


def current() -> Owner:
    """This process's owner, made (with its janitor) on first use."""
    global _current
    with _current_lock:
        if _current is None or _current.pid != os.getpid():
            _current = Owner(state_dir())
        return _current


def _hold_lock(path: Path) -> int:
    """An open descriptor of ``path`` holding its exclusive ``flock``.

    A sweep by another process may take the new, still unlocked file for a dead owner's
    and unlink it between the open and the lock; the lock would then guard a file that is
    no longer there. So the lock counts only if ``path`` is still the file it was taken on.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def sweep(directory: Path) -> list[str]:
    """Reap every record in ``directory`` whose owner and janitor are both gone; their names."""
    reaped = _sweep_unlocked_records(directory)
    host, boot = socket.gethostname(), boot_id()
    for lock_path in sorted(directory.glob("*.lock")):
        with _claimed(lock_path) as claimed:
            if not claimed:
                continue  # a live owner, or its janitor at work
            record_path = lock_path.with_suffix(".json")
            try:
                record = OwnerRecord.from_json(record_path.read_text())
            except (OSError, ValueError, KeyError, TypeError):
                record = None
            if record is not None and record.host != host:
                continue  # a shared cache: that machine's next run cleans up
            if record is not None and record.boot_id == boot:
                reap(record)
            elif record is not None:
                reap(_files_only(record))  # processes and namespaces did not survive the boot
            for leftover in (record_path, record_path.with_suffix(".tmp"), lock_path):
                leftover.unlink(missing_ok=True)  # .tmp: the owner died while saving
            reaped.append(lock_path.stem)
    return reaped


def _sweep_unlocked_records(directory: Path) -> list[str]:
    """Reap records with no lock beside them (left by harness versions whose lock a sweep
    could unlink before its owner held it) once their owner is gone; their names.

    An owner makes its lock before its record and its janitor removes the record before
    the lock, so a live owner's record has a lock, except one of those old versions'.
    """
    reaped = []
    host, boot = socket.gethostname(), boot_id()
    for record_path in sorted(directory.glob("*.json")):
        if record_path.with_suffix(".lock").exists():
            continue
        try:
            record = OwnerRecord.from_json(record_path.read_text())
        except FileNotFoundError:
            continue  # reaped meanwhile
        except (OSError, ValueError, KeyError, TypeError):
            record = None  # unreadable: nobody can be reading it either
        if record is not None and record.host != host:
            continue  # a shared cache: that machine's next run cleans up
        if record is not None and record.boot_id == boot:
            if start_time(record.pid) == record.start:
                continue  # its owner still runs
            reap(record)
        elif record is not None:
            reap(_files_only(record))
        record_path.unlink(missing_ok=True)
        reaped.append(record_path.stem)
    return reaped


def _files_only(record: OwnerRecord) -> OwnerRecord:
    return OwnerRecord(record.owner, record.pid, record.start, record.boot_id, record.host,
                       paths=record.paths, hand_back=record.hand_back)  # fmt: skip


@contextlib.contextmanager
def _claimed(lock_path: Path) -> Iterator[bool]:
    """Whether the lock on ``lock_path`` was free (then it is held for the block)."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


@contextlib.contextmanager
def owned_directory(prefix: str, parent: Path) -> Iterator[Path]:
    """A fresh directory under ``parent``, removed on exit, or after this process dies."""
    with writing(parent, "making a private folder"):
        parent.mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    current().add_path(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        current().remove_path(path)
