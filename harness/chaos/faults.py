"""The faults a chaos run injects: each a :class:`FaultKind` in :data:`FAULT_KINDS`.

A kind names the emulators it applies to (or none: the run's results disk) and how it
is done to one target, found in the run's process tree (the pytest run and everything
under it) by what each emulator runs: ``sshd`` and its ``socat`` proxy (ssh-emu), the
private ``adb`` server and the daemon (adb-emu), ``qemu-system-arm -M <machine>``
(mcu-emu), ``qemu-system-aarch64`` (linux-emu: killing it cuts the board's power mid-write,
docs/linux-emu.md). Processes are killed with SIGKILL, as a crash would end them; a link is
dropped by killing its proxy or by destroying its TCP connections (``ss -K``, as a
pulled cable would leave them); the disk is filled with a file until it takes no more,
then freed after a few seconds. A new fault is one more entry.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.lifecycle import process
from harness.lifecycle.reap import descendants, start_time
from harness.profiles.device_profile import DeviceProfile

RESULTS_DISK = "results"  # the target of a disk fault: the run's results disk
DISK_HOLD_S = 4.0  # how long a filled disk stays full
_FILLER = ".chaos-filler"
_SS_TIMEOUT_S = 10.0

Argv = list[str]


@dataclass(frozen=True)
class Scene:
    """What faults act on: the run's process tree, its devices, its results disk."""

    root_pid: int  # the pytest run
    profiles: Mapping[str, DeviceProfile]
    disk: Path | None  # the small results disk (None: no disk faults)


@dataclass(frozen=True)
class FaultKind:
    """A fault: the emulators it applies to (none: the results disk), how it is done to a
    target (what it hit, one line each; nothing: the target was not up), and how it is
    undone after :data:`DISK_HOLD_S` (a fault that lasts), if it is."""

    name: str
    emulators: tuple[str, ...]
    inject: Callable[[Scene, str], tuple[str, ...]]
    undo: Callable[[Scene, str], None] | None = None


def _tree(scene: Scene) -> list[tuple[int, Argv]]:
    """(pid, argv) of every live process under the run (none between rounds)."""
    found: list[tuple[int, Argv]] = []
    if scene.root_pid <= 0:
        return found
    for pid in sorted(descendants({scene.root_pid})):
        with contextlib.suppress(OSError):
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
            if words:
                found.append((pid, [word.decode(errors="replace") for word in words]))
    return found


def _program(argv: Argv) -> str:
    return os.path.basename(argv[0].split(":", 1)[0].split()[0]) if argv[0] else ""


def _kill(matches: Iterable[tuple[int, Argv]]) -> tuple[str, ...]:
    """SIGKILL each process (unless it is gone already); a line for each one killed."""
    hit: list[str] = []
    for pid, argv in matches:
        if start_time(pid) is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                hit.append(f"SIGKILL {pid} {' '.join(' '.join(argv).split())[:120]}")
    return tuple(hit)


def _is_sshd(argv: Argv) -> bool:
    return _program(argv) == "sshd"


def _is_adb_server(argv: Argv) -> bool:
    return _program(argv) == "adb" and "server" in argv


def _is_adb_daemon(argv: Argv) -> bool:
    return "harness.emulators.adb.daemon" in argv


def _runs_machine(machine: str | None) -> Callable[[Argv], bool]:
    def test(argv: Argv) -> bool:
        words = argv[1:]
        chosen = words[words.index("-M") + 1] if "-M" in words[:-1] else None
        return _program(argv).startswith("qemu-system-") and chosen == machine

    return test


def _is_booted_board(argv: Argv) -> bool:
    return _program(argv) == "qemu-system-aarch64"


def _killing(test: Callable[[Argv], bool]) -> Callable[[Scene, str], tuple[str, ...]]:
    return lambda scene, _: _kill((pid, argv) for pid, argv in _tree(scene) if test(argv))


def _kill_mcu(scene: Scene, target: str) -> tuple[str, ...]:
    return _killing(_runs_machine(scene.profiles[target].machine))(scene, target)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports ``pid`` listens on (its sockets in its network namespace's table)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _cut_connections(scene: Scene, server: Callable[[Argv], bool]) -> tuple[str, ...]:
    """Destroy every TCP connection to the ports the matching processes listen on."""
    hit: list[str] = []
    for pid, argv in _tree(scene):
        for port in sorted(listening_ports(pid)) if server(argv) else ():
            words = ["(", "sport", "=", f":{port}", "or", "dport", "=", f":{port}", ")"]
            done = process.run(["ss", "-K", "-t", "-n", *words], timeout=_SS_TIMEOUT_S)
            cut = [line for line in done.stdout.decode().splitlines()[1:] if line.strip()]
            hit.extend(f"cut TCP {' '.join(line.split()[3:5])}" for line in cut)
    return tuple(hit)


def _drop_link(scene: Scene, target: str) -> tuple[str, ...]:
    """ssh-emu: its ProxyCommand (socat) killed; adb-emu and mcu-emu: their TCP cut."""
    emulator = scene.profiles[target].emulator
    if emulator == "ssh-emu":
        return _killing(lambda argv: _program(argv) == "socat")(scene, target)
    if emulator == "adb-emu":
        return _cut_connections(scene, _is_adb_daemon)
    return _cut_connections(scene, _runs_machine(scene.profiles[target].machine))


def _fill_disk(scene: Scene, _: str) -> tuple[str, ...]:
    """Write a file on the results disk until it takes no more."""
    assert scene.disk is not None
    path = scene.disk / _FILLER
    written = 0
    with open(path, "ab", buffering=0) as filler:
        for chunk in (65536, 256, 1):
            with contextlib.suppress(OSError):
                while True:
                    written += filler.write(b"x" * chunk) or 0
    return (f"filled {scene.disk} ({written} bytes more)",)


def _free_disk(scene: Scene, _: str) -> None:
    if scene.disk is not None:
        (scene.disk / _FILLER).unlink(missing_ok=True)


FAULT_KINDS: tuple[FaultKind, ...] = (
    FaultKind("kill-sshd", ("ssh-emu",), _killing(_is_sshd)),
    FaultKind("kill-adb-server", ("adb-emu",), _killing(_is_adb_server)),
    FaultKind("kill-adbd", ("adb-emu",), _killing(_is_adb_daemon)),
    FaultKind("kill-qemu-mcu", ("mcu-emu",), _kill_mcu),
    FaultKind("cut-power", ("linux-emu",), _killing(_is_booted_board)),
    FaultKind("drop-link", ("ssh-emu", "adb-emu", "mcu-emu"), _drop_link),
    FaultKind("fill-disk", (), _fill_disk, _free_disk),
)


def fault_kind(name: str) -> FaultKind:
    return next(kind for kind in FAULT_KINDS if kind.name == name)


def fault_targets(profiles: Sequence[DeviceProfile], disk: bool) -> list[tuple[str, str]]:
    """Every (kind, target) pair the run can inject: its emulated devices' faults, and the
    results disk's if it has a small one."""
    pairs = [
        (kind.name, profile.name)
        for kind in FAULT_KINDS
        for profile in profiles
        if profile.emulator in kind.emulators
    ]
    if disk:
        pairs += [(kind.name, RESULTS_DISK) for kind in FAULT_KINDS if not kind.emulators]
    return pairs
