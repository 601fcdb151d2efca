"""Removing what one owner (a harness process) left: processes, network namespaces, files.

An :class:`OwnerRecord` is the owner's state file. :func:`reap` ends the record's
processes (each recorded leader still running with its recorded start time, the
processes of its session and its descendants, and every process whose environment
carries the owner's marker), deletes its network namespaces (killing what runs
inside first), removes its files and directories and runs its hand-back commands
(which give back what it held outside this machine, such as a labgrid place). The
janitor applies it when its owner is gone; the next run applies it to records whose
owner and janitor both died.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

MARKER_VARIABLE = "ET_HARNESS_OWNER"
_NETNS_NAME = re.compile(r"et-[A-Za-z0-9-]{1,40}")


@dataclass(frozen=True)
class RecordedProcess:
    """A process group leader the owner started; ``start`` guards against PID reuse."""

    pid: int
    start: int
    name: str


@dataclass(frozen=True)
class OwnerRecord:
    """What one harness process holds, as its state file says."""

    owner: str  # the marker its children carry in MARKER_VARIABLE
    pid: int
    start: int  # the owner's start time, clock ticks after boot (/proc/PID/stat)
    boot_id: str
    host: str
    processes: tuple[RecordedProcess, ...] = ()
    netns: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    janitor: int | None = None
    command: str = ""
    # argv lists to run once the owner is gone: handing back what it holds elsewhere
    # (a labgrid place: cancel its reservation, release it)
    hand_back: tuple[tuple[str, ...], ...] = ()
    # ports of adb servers it ran: any adb server found on one is its, whoever forked it
    adb_ports: tuple[int, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {
                "owner": self.owner, "pid": self.pid, "start": self.start,
                "boot_id": self.boot_id, "host": self.host, "janitor": self.janitor,
                "command": self.command,
                "processes": [vars(p) for p in self.processes],
                "netns": list(self.netns), "paths": list(self.paths),
                "hand_back": [list(argv) for argv in self.hand_back],
                "adb_ports": list(self.adb_ports),
            },
            indent=1,
        )  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> OwnerRecord:
        data = json.loads(text)
        return cls(
            owner=str(data["owner"]),
            pid=int(data["pid"]),
            start=int(data["start"]),
            boot_id=str(data["boot_id"]),
            host=str(data["host"]),
            processes=tuple(
                RecordedProcess(int(p["pid"]), int(p["start"]), str(p["name"]))
                for p in data.get("processes", [])
            ),
            netns=tuple(str(n) for n in data.get("netns", [])),
            paths=tuple(str(p) for p in data.get("paths", [])),
            janitor=data.get("janitor"),
            command=str(data.get("command", "")),
            hand_back=tuple(tuple(str(arg) for arg in argv) for argv in data.get("hand_back", [])),
            adb_ports=tuple(int(port) for port in data.get("adb_ports", [])),
        )


def boot_id() -> str:
    """This boot's id: a PID and start time name a process only within one boot."""
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot), or None if it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def descendants(roots: set[int]) -> set[int]:
    """Live descendants of ``roots`` (not the roots themselves)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, stat in _stats():
        children[int(stat[1])].append(pid)
    found: set[int] = set()
    pending = list(roots)
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def session_members(sids: set[int]) -> set[int]:
    """Processes in the sessions ``sids``: a session id stays taken while one is left."""
    return {pid for pid, stat in _stats() if int(stat[3]) in sids}


def marked(owner: str) -> set[int]:
    """Processes whose environment says they belong to ``owner``."""
    needle = f"\0{MARKER_VARIABLE}={owner}\0".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdecimal():
            with contextlib.suppress(OSError):
                if needle in b"\0" + (entry / "environ").read_bytes():
                    found.add(int(entry.name))
    return found


def adb_servers(ports: Iterable[int]) -> set[int]:
    """adb servers on any of ``ports``, however started: run in the foreground (``adb -P
    PORT server nodaemon``) or forked by a client that found none (``adb -L tcp:PORT
    fork-server server``), which leaves the process group and carries no marker."""
    wanted = {str(port) for port in ports}
    found = set()
    for entry in Path("/proc").iterdir() if wanted else ():
        if not entry.name.isdecimal():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        words = [word.decode(errors="replace") for word in argv]
        if not words or os.path.basename(words[0]) != "adb" or "server" not in words:
            continue
        listed = {w.rsplit(":", 1)[-1] for w in words if w.startswith("tcp:")}
        listed |= {words[i + 1] for i, w in enumerate(words[:-1]) if w == "-P"}
        if listed & wanted:
            found.add(int(entry.name))
    return found


def end_processes(pids: set[int], grace: float) -> None:
    """SIGTERM ``pids``, and SIGKILL those still running after ``grace`` seconds."""
    started = {pid: start_time(pid) for pid in pids}
    alive = {pid: start for pid, start in started.items() if start is not None}
    _signal_all(alive, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = {pid: start for pid, start in alive.items() if start_time(pid) == start}
    _signal_all(alive, signal.SIGKILL)


def delete_netns(name: str) -> None:
    """Kill what runs in network namespace ``name`` and delete it; quiet if it is gone."""
    if not _NETNS_NAME.fullmatch(name) or not Path("/run/netns", name).exists():
        return
    listed = subprocess.run(
        ["ip", "netns", "pids", name], capture_output=True, text=True, check=False
    )
    inside = {int(pid) for pid in listed.stdout.split()}
    _signal_all({pid: start_time(pid) for pid in inside}, signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def remove_path(path: str) -> None:
    """Remove a file or directory tree (not following symlinks); quiet if it is gone."""
    target = Path(path)
    if not target.is_absolute():
        return
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()


def still_running(record: OwnerRecord) -> set[int]:
    """Every live process ``record`` names (see the module docstring), this one aside."""
    leaders = {p.pid for p in record.processes if start_time(p.pid) == p.start}
    targets = leaders | session_members(leaders) | marked(record.owner)
    targets |= adb_servers(record.adb_ports)
    targets |= descendants(targets)
    targets.discard(os.getpid())
    return targets


def reap(record: OwnerRecord, grace: float = 1.0) -> None:
    """End and remove everything ``record`` names (see the module docstring)."""
    end_processes(still_running(record), grace)
    for name in record.netns:
        delete_netns(name)
    for path in record.paths:
        remove_path(path)
    for argv in record.hand_back:
        hand_back(argv)


def hand_back(argv: tuple[str, ...], timeout: float = 30.0) -> None:
    """Run one of a record's hand-back commands; quiet if it fails (it was done already)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )


def _stats() -> list[tuple[int, list[str]]]:
    """(pid, fields after the command name) of every process: state, ppid, pgrp, session..."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdecimal():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            found.append((int(entry.name), stat[stat.rindex(")") + 2 :].split()))
    return found


def _signal_all(pids: Mapping[int, int | None], signum: int) -> None:
    for pid, start in pids.items():
        if start is not None and start_time(pid) == start:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
