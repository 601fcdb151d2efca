"""One holder per device across processes on a host: a file lock plus a note of who holds it.

Two pytest runs (two CI jobs, or xdist workers) that want the same device take
its lock in turn. The lock is an ``flock`` on ``<lock dir>/<device>.lock``
(released by the kernel when the holder dies, even by SIGKILL); next to it,
``<device>.holder.json`` says who holds it, so that a run that gives up waiting
can name the holder. Locks are per host: devices shared between hosts need a
lab-wide lock (labgrid, see :mod:`harness.profiles.lab_setting`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shlex
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import filelock

from harness.lifecycle.cache import cache_root
from harness.lifecycle.disk import writing
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.kinds import device_kind
from harness.transport.base import DeviceUnavailable

_COMMAND_CHARS = 300


def default_lock_dir() -> Path:
    """``locks/`` in the harness cache (``$ET_HARNESS_CACHE`` or ``~/.cache/et-harness``)."""
    return cache_root() / "locks"


class DeviceBusy(DeviceUnavailable):
    """Another process held the device for longer than this run was allowed to wait."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a device: written next to its lock by the holder."""

    device: str
    pid: int
    host: str
    since: float  # seconds since the epoch
    command: str

    @classmethod
    def this_process(cls, device: str) -> LockHolder:
        command = shlex.join(sys.argv)
        if len(command) > _COMMAND_CHARS:
            command = command[: _COMMAND_CHARS - 3] + "..."
        return cls(device, os.getpid(), socket.gethostname(), time.time(), command)

    def describe(self) -> str:
        since = datetime.datetime.fromtimestamp(self.since).isoformat(timespec="seconds")
        held = time.time() - self.since
        return (
            f"pid {self.pid} on {self.host}, since {since} ({held:.0f} s), command: {self.command}"
        )


def device_key(profile: DeviceProfile) -> str:
    """What identifies the hardware behind a profile, so that two profiles naming one
    board (a copy of rpi5.yaml, /dev/ttyACM0 in two files) share one lock.

    Emulated devices and the host are their profile's name: each run starts its own
    emulator, and host profiles differ by work directory."""
    key = device_kind(profile.kind).lock_key
    if profile.emulator is not None or key is None:
        return profile.name
    return key(profile.settings)


class DeviceLock:
    """Exclusive use of one device by this process.

    ``device`` names it in messages; ``key`` (default: the name) identifies it, see
    :func:`device_key`.
    """

    def __init__(self, device: str, lock_dir: Path, key: str | None = None) -> None:
        key = key or device
        readable = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:40]
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        self.device = device
        self.path = lock_dir / f"{readable}-{digest}.lock"
        self.holder_path = lock_dir / f"{readable}-{digest}.holder.json"
        self._lock = filelock.FileLock(self.path)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def acquire(self, timeout: float) -> None:
        """Take the lock, waiting at most ``timeout`` seconds; :class:`DeviceBusy` if not."""
        step = f"taking the lock on device {self.device!r}"
        try:
            with writing(self.path.parent, step):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._lock.acquire(timeout=timeout)
        except filelock.Timeout:
            holder = self.holder()
            who = holder.describe() if holder else "a process that left no holder note"
            raise DeviceBusy(
                f"device {self.device!r} is in use by {who}; gave up after waiting "
                f"{timeout:.1f} s for {self.path} (raise --lock-timeout, or wait for that run "
                "to end)"
            ) from None
        note = self.holder_path.with_name(f".{self.holder_path.name}.{os.getpid()}")
        try:
            with writing(self.path.parent, step):
                note.write_text(json.dumps(asdict(LockHolder.this_process(self.device))), "utf-8")
                os.replace(note, self.holder_path)
        except BaseException:
            note.unlink(missing_ok=True)
            self._lock.release(force=True)
            raise

    def release(self) -> None:
        """Give the device up (the holder note first, so it never names the next holder)."""
        if not self._lock.is_locked:
            return
        try:
            self.holder_path.unlink(missing_ok=True)
        finally:
            self._lock.release(force=True)

    def holder(self) -> LockHolder | None:
        """Who holds the device, as its holder note says (None if there is no note)."""
        try:
            return LockHolder(**json.loads(self.holder_path.read_text("utf-8")))
        except (OSError, ValueError, TypeError):
            return None
