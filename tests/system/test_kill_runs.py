"""Killed runs leave nothing behind (issue 11, item 5).

Each test starts a real run in a subprocess (pytest, or ``et-harness emu``) with a
token of its own in the environment, waits until every device is busy in the middle
of a test, and takes the run's footprint: the processes of its process tree, those
carrying the token, everything inside the network namespaces those processes use,
ssh-emu's authorized_keys file and the emulators' temporary directories. It checks
the footprint holds what each device runs (so the test can fail), signals the run,
and polls (with a deadline, no fixed sleeps) until none of it is left. Only this
test's own processes are looked at: other runs may be live on the machine.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from carried_token import carrying
from prerequisites import require
from run_environment import run_environment

from harness.lifecycle.reap import descendants, start_time

REPO = Path(__file__).resolve().parents[2]
TOKEN_VARIABLE = "ET_KILL_TEST_TOKEN"
BRING_UP_TIMEOUT = 300.0  # several emulators and agents starting on a loaded 2-core machine
GONE_WITHIN = 15.0  # "within seconds": the janitor needs ~2, the rest is load headroom

CASES = """\
import os
import pathlib
import time

import pytest

from harness.data.options import OptionsMap

pytestmark = pytest.mark.slow


def test_before(et, device):
    et.set(OptionsMap.from_dict({"ProbeA": {"k": 1}})).raise_for_differences()


def test_hold(et, device):
    flag = pathlib.Path(os.environ["KILL_RUN_FLAGS"]) / f"{device.name}.reached"
    flag.write_text(str(os.getpid()))
    time.sleep(180)  # the outer test signals the run while this test runs
    pytest.fail("the run was not signalled")
"""

# What each device runs while a test holds it: a cmdline substring the footprint must show.
DEVICE_PROCESSES = {
    "host": ("et-agent",),
    "ssh-emu": ("sshd", "socat", "qemu-aarch64"),
    "adb-emu": ("harness.emulators.adb.daemon", "server nodaemon", "qemu-aarch64"),
    "mcu-emu": ("qemu-system-arm",),
    "linux-emu": ("qemu-system-aarch64",),  # the booted board: its QEMU is its power
}


@pytest.fixture(autouse=True)
def _prerequisites() -> None:
    require("/usr/sbin/sshd", "adb", "qemu-system-arm", "qemu-aarch64", "ip", root=True)


# ---- the footprint of a run --------------------------------------------------------------


@dataclass
class Footprint:
    """What a run holds: processes (pid -> start time, cmdline), namespaces, paths."""

    processes: dict[int, tuple[int, str]] = field(default_factory=dict)
    netns: set[str] = field(default_factory=set)
    paths: set[Path] = field(default_factory=set)

    def add(self, other: Footprint) -> None:
        self.processes.update(other.processes)
        self.netns |= other.netns
        self.paths |= other.paths

    def commands(self) -> str:
        return "\n".join(f"  {pid}: {cmd}" for pid, (_, cmd) in sorted(self.processes.items()))

    def left(self, token: str | None) -> list[str]:
        """What is still there, and processes started since that carry ``token``."""
        left = [f"process {pid}: {cmd}" for pid, (start, cmd) in self.processes.items()
                if start_time(pid) == start]  # fmt: skip
        if token is not None:
            left += [f"process {pid}: {_cmdline(pid)}" for pid in carrying(TOKEN_VARIABLE, token)
                     if pid not in self.processes]  # fmt: skip
        left += [f"namespace {name}" for name in self.netns if Path("/run/netns", name).exists()]
        left += [f"path {path}" for path in self.paths if path.exists()]
        return left

    def missing(self) -> list[str]:
        """What is no longer there."""
        gone = [f"process {pid}: {cmd}" for pid, (start, cmd) in self.processes.items()
                if start_time(pid) != start]  # fmt: skip
        gone += [f"namespace {n}" for n in self.netns if not Path("/run/netns", n).exists()]
        gone += [f"path {path}" for path in self.paths if not path.exists()]
        return gone


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def _netns_inodes() -> dict[int, str]:
    found = {}
    for entry in Path("/run/netns").glob("*") if Path("/run/netns").is_dir() else []:
        try:
            found[entry.stat().st_ino] = entry.name
        except OSError:
            continue
    return found


def _net_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def footprint_of(roots: set[int], token: str | None) -> Footprint:
    """The processes under ``roots`` (and those carrying ``token``), their namespaces'
    processes, and the files and directories their command lines point at."""
    pids = (
        roots
        | descendants(roots)
        | (carrying(TOKEN_VARIABLE, token) if token is not None else set())
    )
    namespaces = _netns_inodes()
    used = {namespaces[inode] for pid in pids if (inode := _net_inode(pid)) in namespaces}
    inodes = {inode for inode, name in namespaces.items() if name in used}
    pids |= {int(e.name) for e in Path("/proc").iterdir()
             if e.name.isdigit() and _net_inode(int(e.name)) in inodes}  # fmt: skip
    found = Footprint(netns=used)
    for pid in pids:
        start = start_time(pid)
        if start is not None:
            found.processes[pid] = (start, _cmdline(pid))
    for _, cmd in found.processes.values():
        config = re.search(r"sshd -D -e -f (\S+)", cmd)
        if config:
            emulator_dir = Path(config.group(1)).parent.parent  # <emulators>/ssh-emu-XXXX
            found.paths.add(emulator_dir)
            keys = re.search(r"AuthorizedKeysFile \.ssh/(\S+)", Path(config.group(1)).read_text())
            assert keys, f"no AuthorizedKeysFile in {config.group(1)}"
            found.paths.add(Path("/home/etdevice/.ssh") / keys.group(1))
        root = re.search(r"harness\.emulators\.adbd --root (\S+)", cmd)
        if root:
            found.paths.add(Path(root.group(1)).parent)  # <emulators>/adb-emu-XXXX
    return found


def assert_gone(footprint: Footprint, token: str | None, what: str) -> float:
    """Wait until nothing of ``footprint`` (nor a process carrying ``token``) is left;
    the seconds that took."""
    started = time.monotonic()
    while (left := footprint.left(token)) and time.monotonic() - started < GONE_WITHIN:
        time.sleep(0.1)
    assert not left, f"{what}: still there after {GONE_WITHIN:g} s:\n" + "\n".join(left)
    return time.monotonic() - started


def assert_runs(footprint: Footprint, device: str) -> None:
    for part in DEVICE_PROCESSES[device]:
        assert any(part in cmd for _, cmd in footprint.processes.values()), (
            f"{device} should run {part!r} mid-test; the footprint is:\n{footprint.commands()}"
        )
    if device == "ssh-emu":
        assert footprint.netns and any(p.name.startswith("authorized_keys.et-")
                                       for p in footprint.paths), footprint  # fmt: skip


# ---- a pytest run held in the middle ------------------------------------------------------


@dataclass
class HeldRun:
    process: subprocess.Popen[bytes]
    token: str
    directory: Path
    devices: tuple[str, ...]

    @property
    def log(self) -> str:
        return (self.directory / "run.log").read_text(errors="replace")

    def wait_until_held(self) -> dict[str, int]:
        """Device -> PID of the pytest process holding it, once every device is held."""
        flags = self.directory / "flags"
        deadline = time.monotonic() + BRING_UP_TIMEOUT
        while time.monotonic() < deadline:
            reached = {f.name.removesuffix(".reached"): f for f in flags.glob("*.reached")}
            if set(reached) == set(self.devices):
                texts = {name: f.read_text() for name, f in reached.items()}
                if all(texts.values()):
                    return {name: int(text) for name, text in texts.items()}
            if self.process.poll() is not None:
                pytest.fail(f"the run ended ({self.process.returncode}) early:\n{self.log}")
            time.sleep(0.1)
        pytest.fail(f"the devices were not all held within {BRING_UP_TIMEOUT:g} s:\n{self.log}")

    def footprint(self, holders: dict[str, int]) -> Footprint:
        whole = footprint_of({self.process.pid}, self.token)
        for device, pid in holders.items():
            assert_runs(footprint_of({pid}, None), device)
        return whole

    def results(self) -> list[dict[str, str]]:
        path = self.directory / "results" / "results.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def held_run(tmp_path: Path) -> Iterator[Callable[..., HeldRun]]:
    runs: list[HeldRun] = []

    def start(devices: tuple[str, ...], *options: str) -> HeldRun:
        directory = tmp_path / f"run{len(runs)}"
        (directory / "flags").mkdir(parents=True)
        (directory / "test_cases.py").write_text(CASES)
        token = f"kill-{secrets.token_hex(6)}"
        env = run_environment()
        env.update({TOKEN_VARIABLE: token, "KILL_RUN_FLAGS": str(directory / "flags")})
        with open(directory / "run.log", "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "pytest", "test_cases.py", "-p", "no:cacheprovider",
                 "--device", ",".join(devices), *options,
                 "--lock-dir", str(directory / "locks"),
                 "--results-dir", str(directory / "results")],
                cwd=directory, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        run = HeldRun(process, token, directory, devices)
        runs.append(run)
        return run

    yield start
    for run in runs:  # a failed test must not leave its run behind either
        if run.process.poll() is None:
            os.killpg(run.process.pid, signal.SIGKILL)
            run.process.wait()


def _passed_before(run: HeldRun) -> None:
    """Every result finished before the signal is kept."""
    outcomes = {(r.get("device"), r["nodeid"].split("::")[-1].split("[")[0]): r["outcome"]
                for r in run.results()}  # fmt: skip
    for device in run.devices:
        assert outcomes.get((device, "test_before")) == "passed", (outcomes, run.log)


DEVICES = ("host", "ssh-emu", "adb-emu", "mcu-emu")
# linux-emu boots a board (its QEMU, labgrid's driver): in the nightly's board job
BOOTED = pytest.param("linux-emu", marks=pytest.mark.nightly)


@pytest.mark.parametrize("device", [*DEVICES, BOOTED])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_signalled_run_leaves_nothing(held_run, device: str, signum: int) -> None:
    run = held_run((device,))
    footprint = run.footprint(run.wait_until_held())
    os.kill(run.process.pid, signum)
    code = run.process.wait(60)
    took = assert_gone(footprint, run.token, f"{device} after {signal.Signals(signum).name}")
    print(f"{device} {signal.Signals(signum).name}: exit {code}, all gone {took:.1f} s later")
    if signum == signal.SIGTERM:
        assert code == pytest.ExitCode.INTERRUPTED, run.log
        assert "SIGTERM: the run stops" in run.log
        _passed_before(run)
    else:
        assert code == -signal.SIGKILL


PAIRS = [("ssh-emu", "mcu-emu"), ("adb-emu", "host")]
# How a run is signalled: its controller only (`kill PID`, the OOM killer), or its whole
# process group, controller and workers (what `timeout` and a terminal do).
HOW = {"SIGTERM": (signal.SIGTERM, False), "SIGTERM-group": (signal.SIGTERM, True),
       "SIGKILL": (signal.SIGKILL, False)}  # fmt: skip


@pytest.mark.parametrize("devices", PAIRS, ids=["+".join(p) for p in PAIRS])
@pytest.mark.parametrize("how", HOW)
def test_a_signalled_xdist_run_leaves_nothing(held_run, devices: tuple[str, str], how: str) -> None:
    signum, to_group = HOW[how]
    run = held_run(devices, "-n", "2")
    holders = run.wait_until_held()
    assert len(set(holders.values())) == 2, f"each device on its own worker: {holders}"
    footprint = run.footprint(holders)
    if to_group:
        os.killpg(run.process.pid, signum)  # emulators and janitors are in sessions of their own
    else:
        os.kill(run.process.pid, signum)
    code = run.process.wait(60)
    took = assert_gone(footprint, run.token, f"{devices} under -n 2 after {how}")
    print(f"{'+'.join(devices)} -n 2 {how}: exit {code}, all gone {took:.1f} s later")
    if signum == signal.SIGTERM:
        assert code == pytest.ExitCode.INTERRUPTED, run.log
        _passed_before(run)
    # Workers whose controller is gone tear down quietly (xdist's teardown once warned:
    # PluggyTeardownRaisedWarning ... OSError: cannot send (already closed?)).
    assert "PluggyTeardownRaisedWarning" not in run.log, run.log
    assert "cannot send" not in run.log, run.log


def test_a_signalled_xdist_worker_stops_its_devices(held_run) -> None:
    run = held_run(("ssh-emu", "adb-emu"), "-n", "2")
    holders = run.wait_until_held()
    ssh_side = footprint_of({holders["ssh-emu"]}, None)
    adb_side = footprint_of({holders["adb-emu"]}, None)
    assert_runs(ssh_side, "ssh-emu")
    assert_runs(adb_side, "adb-emu")
    worker = holders["ssh-emu"]
    emulator = Footprint(
        netns=ssh_side.netns,
        paths=ssh_side.paths,
        processes={
            pid: entry
            for pid, entry in ssh_side.processes.items()
            if pid not in (worker, _janitor_of(worker))
        },
    )  # the worker's own end is xdist's affair
    os.kill(worker, signal.SIGTERM)
    took = assert_gone(emulator, None, "ssh-emu after its worker's SIGTERM")
    print(f"worker SIGTERM: ssh-emu gone {took:.1f} s later")
    assert not adb_side.missing(), "the other worker's device must go on"
    os.kill(run.process.pid, signal.SIGTERM)
    run.process.wait(60)
    assert_gone(adb_side, run.token, "adb-emu after the controller's SIGTERM")


# ---- et-harness emu ------------------------------------------------------------------------


@dataclass
class EmuRun:
    process: subprocess.Popen[bytes]
    token: str
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def start_emu(tmp_path: Path, device: str) -> EmuRun:
    token = f"emu-{secrets.token_hex(6)}"
    log = tmp_path / f"emu-{device}-{token}.log"
    env = {**os.environ, TOKEN_VARIABLE: token}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "emu", device], cwd=REPO, env=env,
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    run = EmuRun(process, token, log)
    deadline = time.monotonic() + BRING_UP_TIMEOUT
    while "Ctrl-C brings it down." not in run.text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"et-harness emu {device} did not come up:\n{run.text()}")
        time.sleep(0.1)
    return run


EMU_DEVICES = ("ssh-emu", "adb-emu", "mcu-emu")
EMU_PROCESSES = {
    "ssh-emu": ("sshd -D", "harness.lifecycle.janitor"),
    "adb-emu": ("harness.emulators.adb.daemon", "server nodaemon", "harness.lifecycle.janitor"),
    "mcu-emu": ("qemu-system-arm", "harness.lifecycle.janitor"),
}


@pytest.mark.parametrize("device", EMU_DEVICES)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_emu_stops_in_about_two_seconds(tmp_path: Path, device: str, signum: int) -> None:
    run = start_emu(tmp_path, device)
    footprint = footprint_of({run.process.pid}, run.token)
    for part in EMU_PROCESSES[device]:
        assert any(part in cmd for _, cmd in footprint.processes.values()), footprint.commands()
    started = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(run.process.pid, signum)  # what Ctrl-C at a terminal does
    else:
        os.kill(run.process.pid, signum)
    try:
        code = run.process.wait(5.0)
    except subprocess.TimeoutExpired:
        run.process.kill()
        pytest.fail(f"et-harness emu {device} still runs 5 s after {signum!r}:\n{run.text()}")
    took = time.monotonic() - started
    print(f"et-harness emu {device}: down {took:.2f} s after {signal.Signals(signum).name}")
    assert code == 0, run.text()
    assert f"{device} is down" in run.text()
    assert_gone(footprint, run.token, f"et-harness emu {device}")


def _janitor_of(pid: int) -> int:
    found = [
        child for child in descendants({pid}) if "harness.lifecycle.janitor" in _cmdline(child)
    ]
    assert len(found) == 1, f"one janitor under {pid}: {found}"
    return found[0]


def test_the_next_run_removes_a_dead_runs_leftovers_but_not_a_live_runs(tmp_path: Path) -> None:
    live = start_emu(tmp_path, "ssh-emu")
    dead = start_emu(tmp_path, "ssh-emu")
    live_print = footprint_of({live.process.pid}, live.token)
    dead_print = footprint_of({dead.process.pid}, dead.token)
    assert live_print.netns and dead_print.netns
    # Power cut for the dead run: its janitor first, then the run itself.
    os.kill(_janitor_of(dead.process.pid), signal.SIGKILL)
    os.kill(dead.process.pid, signal.SIGKILL)
    dead.process.wait(10)
    assert dead_print.left(dead.token), "the leftovers the next run must remove"
    assert any("sshd" in line for line in dead_print.left(dead.token))
    following = start_emu(tmp_path, "mcu-emu")  # any run that starts an emulator sweeps
    try:
        assert_gone(dead_print, dead.token, "the dead run's leftovers")
        assert not live_print.missing(), "nothing of the live run may have gone"
    finally:
        for run in (live, following):
            os.kill(run.process.pid, signal.SIGTERM)
        for run in (live, following):
            run.process.wait(10)
    assert_gone(live_print, live.token, "the live run, once stopped")


# s (3.5-4.9 s seen); xdist alone waits 10 s for its workers (8.4-13.3 s seen)
CONTROLLER_EXIT_WITHIN = 6.5

SLEEPERS = """\
import time


def test_sleep_a():
    time.sleep(120)


def test_sleep_b():
    time.sleep(120)
"""


def test_a_sigtermed_xdist_controller_passes_it_on_to_its_workers(tmp_path: Path) -> None:
    """`kill PID` of a -n 2 controller (CI cancellation) ends it without xdist's 10 s wait."""
    (tmp_path / "test_sleepers.py").write_text(SLEEPERS)
    env = run_environment()
    with open(tmp_path / "run.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "test_sleepers.py", "-p", "no:cacheprovider",
             "-n", "2", "-v", "--results-dir", str(tmp_path / "results")],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + BRING_UP_TIMEOUT
        while (tmp_path / "run.log").read_text().count("test_sleep_") < 2:  # both started
            assert process.poll() is None and time.monotonic() < deadline, (
                tmp_path / "run.log"
            ).read_text()
            time.sleep(0.1)
        signalled = time.monotonic()
        os.kill(process.pid, signal.SIGTERM)  # the controller only
        code = process.wait(60)
        took = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    print(f"-n 2 controller SIGTERM: exit {code} after {took:.1f} s")
    assert code == pytest.ExitCode.INTERRUPTED, (tmp_path / "run.log").read_text()
    assert took < CONTROLLER_EXIT_WITHIN, f"the controller took {took:.1f} s"
