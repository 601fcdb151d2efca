"""A chaos run: the device suites on every device for a given time, under seeded faults.

Rounds of ``pytest`` (the suites, one xdist worker per device, the round's time as
``--run-timeout``) follow one another until the time is up, while an injector thread
injects the seed's schedule (:mod:`harness.chaos.schedule`, :mod:`harness.chaos.faults`)
into whatever round runs then. Between polls the run keeps the ownership records of the
round's harness processes, so that at the end it can tell whether anything they
started is still running (:mod:`harness.chaos.invariants`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from harness import shipped
from harness.chaos.faults import DISK_HOLD_S, Scene, fault_kind, fault_targets
from harness.chaos.invariants import Injection, Round
from harness.chaos.report import RECORD_NAME, ChaosRecord
from harness.chaos.results_disk import can_mount, move_out, results_disk
from harness.chaos.schedule import MEAN_GAP_S, MIN_ROUND_S, Fault, plan
from harness.errors import UsageError
from harness.history.target import OFF, STORE_ENV
from harness.lifecycle import owner, process
from harness.lifecycle.reap import OwnerRecord, descendants, still_running
from harness.profiles.device_profile import DeviceProfile

ROUND_GRACE_S = 180.0  # a round may end this long after its --run-timeout
SETTLE_S = 30.0  # after the last round, how long its processes may take to end
EMULATOR_RESTARTS = 100  # per device and round: a fault after a fault is still survived
_POLL_S = 1.0


class ChaosFolderError(ValueError, UsageError):
    """The chaos run's folder holds files of something else."""


@dataclass(frozen=True)
class ChaosSettings:
    """What to run: the seed, for how long, on which devices, where, with what for pytest."""

    seed: int
    duration_s: float
    device: str  # the --device value the rounds get
    profiles: tuple[DeviceProfile, ...]
    folder: Path
    every_s: float = MEAN_GAP_S  # one fault per this many seconds, on average
    min_round_s: float = MIN_ROUND_S  # a later round starts only with this much time left
    pytest_args: tuple[str, ...] = ()


class _Injector(threading.Thread):
    """Injects ``faults`` at their moments into the scene of the moment, and undoes
    those that last after :data:`DISK_HOLD_S`; :meth:`finish` undoes what is left."""

    def __init__(
        self,
        faults: Sequence[Fault],
        started: float,
        scene: Callable[[], Scene],
        say: Callable[[str], None],
    ) -> None:
        super().__init__(name="chaos-injector", daemon=True)
        self._faults, self._begun, self._scene, self._say = list(faults), started, scene, say
        self._halt = threading.Event()
        self._undo: list[tuple[float, Fault]] = []
        self.injected: list[Injection] = []

    def run(self) -> None:
        pending = list(self._faults)
        while pending or self._undo:
            due = [self._begun + f.at_s for f in pending[:1]] + [u[0] for u in self._undo]
            if self._halt.wait(max(0.0, min(due) - time.time())):
                return
            self._undo_due(time.time())
            if pending and self._begun + pending[0].at_s <= time.time():
                self._inject(pending.pop(0))

    def _inject(self, fault: Fault) -> None:
        kind = fault_kind(fault.kind)
        at = time.time()
        try:
            hit = kind.inject(self._scene(), fault.target)
        except (OSError, subprocess.SubprocessError) as exc:
            hit = ()
            self._say(f"chaos: {fault.kind} on {fault.target} failed: {exc}")
        self.injected.append(Injection(fault, at, hit))
        self._say(f"chaos: {fault.line().strip()}: {'; '.join(hit) or 'missed (not up)'}")
        if kind.undo is not None and hit:
            self._undo.append((at + DISK_HOLD_S, fault))

    def _undo_due(self, now: float) -> None:
        for entry in [u for u in self._undo if u[0] <= now]:
            self._undo.remove(entry)
            undo = fault_kind(entry[1].kind).undo
            if undo is not None:
                undo(self._scene(), entry[1].target)

    def finish(self) -> None:
        self._halt.set()
        self.join()
        self._undo_due(float("inf"))


class _Rounds:
    """The rounds of one run, and the ownership records of their harness processes."""

    def __init__(self, settings: ChaosSettings, disk: Path | None) -> None:
        self.settings, self.disk = settings, disk
        self.root = 0  # the running round's pytest
        self.owners: dict[str, OwnerRecord] = {}
        self.rounds: list[Round] = []
        self.notes: list[str] = []

    def scene(self) -> Scene:
        return Scene(self.root, {p.name: p for p in self.settings.profiles}, self.disk)

    def run_one(self, seconds: float) -> None:
        """One round of at most ``seconds`` (its ``--run-timeout``)."""
        number, folder = len(self.rounds) + 1, self.settings.folder
        name = f"round-{number}"
        results = (self.disk or folder) / name
        junit, started = folder / f"{name}.junit.xml", time.time()
        argv = [
            sys.executable,
            "-m",
            "pytest",
            *shipped.suite_arguments(),
            "-p",
            "no:cacheprovider",
            "-q",
            "--device",
            self.settings.device,
            "-n",
            str(len(self.settings.profiles)),
            "--run-timeout",
            f"{seconds:.0f}",
            "--emulator-restarts",
            str(EMULATOR_RESTARTS),
            "--results-dir",
            str(results),
            "--junitxml",
            str(junit),
            *self.settings.pytest_args,
        ]
        env = {**os.environ, STORE_ENV: OFF}  # chaos stays out of the run history
        with open(folder / f"{name}.log", "wb") as log:
            child = process.popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
            self.root = child.pid
            self._wait(child, started + seconds + ROUND_GRACE_S, name)
            self.root = 0
        if self.disk is not None:
            move_out(results, folder / name)
        self.rounds.append(Round(folder / name, junit, started, time.time()))

    def _wait(self, child: subprocess.Popen[bytes], deadline: float, name: str) -> None:
        while True:
            self._keep_owners({child.pid} | descendants({child.pid}))
            try:
                child.wait(_POLL_S)
                return
            except subprocess.TimeoutExpired:
                if time.time() > deadline:
                    self.notes.append(f"{name}: pytest ran {ROUND_GRACE_S:g} s past its time")
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                    return

    def _keep_owners(self, pids: set[int]) -> None:
        """The latest ownership record of each harness process among ``pids``."""
        for path in owner.state_dir().glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                record = OwnerRecord.from_json(path.read_text())
                if record.pid in pids:
                    self.owners[record.owner] = record

    def settled_owners(self) -> tuple[OwnerRecord, ...]:
        """The records kept and this process's own, once what they name has ended (or
        :data:`SETTLE_S` has passed)."""
        mine = owner.current().record_path
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            self.owners[owner.current().name] = OwnerRecord.from_json(mine.read_text())
        deadline = time.time() + SETTLE_S
        while time.time() < deadline and any(still_running(r) for r in self.owners.values()):
            time.sleep(0.5)
        return tuple(self.owners.values())


def _prepare(folder: Path) -> None:
    """``folder`` empty, or a former chaos run's (its files are replaced)."""
    if folder.is_dir() and any(folder.iterdir()):
        if not (folder / RECORD_NAME).is_file():
            raise ChaosFolderError(
                f"--results-dir {folder}: holds files of something else; give a new folder"
            )
        for old in folder.glob("round-*"):
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        (folder / RECORD_NAME).unlink()
    folder.mkdir(parents=True, exist_ok=True)


def run_chaos(settings: ChaosSettings, say: Callable[[str], None]) -> ChaosRecord:
    """Run ``settings``'s chaos; its record (also saved in its folder)."""
    _prepare(settings.folder)
    with ExitStack() as stack:
        disk = stack.enter_context(results_disk(settings.folder / "disk")) if can_mount() else None
        targets = tuple(sorted(set(fault_targets(settings.profiles, disk is not None))))
        faults = plan(settings.seed, settings.duration_s, targets, settings.every_s)
        say(
            f"chaos: seed {settings.seed}, {settings.duration_s:g} s on "
            f"{', '.join(p.name for p in settings.profiles)}; {len(faults)} faults planned:"
        )
        for fault in faults:
            say(f"  {fault.line()}")
        if disk is None:
            say("  (no fill-disk: mounting a small results disk needs root)")
        rounds = _Rounds(settings, disk)
        started = time.time()
        injector = _Injector(faults, started, rounds.scene, say)
        injector.start()
        try:
            while (left := started + settings.duration_s - time.time()) > 0:
                if rounds.rounds and left < settings.min_round_s:
                    break
                rounds.run_one(left)
        finally:
            injector.finish()
    record = ChaosRecord(
        settings.seed,
        settings.duration_s,
        settings.every_s,
        targets,
        tuple(injector.injected),
        tuple(rounds.rounds),
        rounds.settled_owners(),
        tuple(rounds.notes),
    )
    record.save(settings.folder)
    return record
