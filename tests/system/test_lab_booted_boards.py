"""Linux boards that boot, as places of a labgrid lab, acquired through its coordinator.

The lab (:mod:`harness.emulators.labgrid_lab`, ``linux_boards=2``) has two exporters,
each with a linux-emu board (Debian's arm64 kernel under QEMU) whose SSH is the place's
``NetworkService`` and whose power is its ``NetworkPowerPort``: places ``boot-a`` and
``boot-b``, tagged ``kind=linux_board pool=lab``. The runs are real pytest runs through
devices/lab-linux-board.yaml (``recover: power``, ``quarantine: lab``). A power cut is the
lab's switch turned off mid-test; the harness must switch it on again through labgrid,
wait while the board boots, retry the test, and keep every result.

Marked nightly: every board boot is seconds of a core under QEMU's TCG (the nightly's
board job runs them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_runs import in_flight, parse_places, place_of, set_place
from prerequisites import require
from run_environment import run_environment

from harness.emulators.labgrid_lab import LabgridLab, running_lab
from harness.lifecycle.reap import descendants

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.nightly]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabgridLab]:
    require("qemu-system-aarch64", "qemu-system-arm", "ser2net", "ssh-keygen", "mke2fs")
    require(str(Path(sys.executable).parent / "labgrid-client"))
    files = tmp_path_factory.mktemp("lab-files")
    with running_lab(2, files=files, linux_boards=2) as running:
        flashes = [str(p.board.board.flash).encode() for p in running.linux_board_places]
        yield running
    # nothing the lab started for its boards outlives it: no QEMU booting their flash
    left = []
    for pid in descendants({os.getpid()}):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            left += [pid for flash in flashes if flash in argv]
    assert not left, left


@pytest.fixture
def devices(tmp_path: Path, lab: LabgridLab) -> Path:
    """devices/lab-linux-board.yaml as shipped, pointed at this lab (its coordinator and
    SSH files), with a 20 s bound on a board's boot."""
    shipped = (ROOT / "devices" / "lab-linux-board.yaml").read_text()
    assert shipped.count("~/.cache/et-harness/labgrid-lab/") == 2 and "connect: 60" in shipped
    text = (
        shipped.replace('"127.0.0.1:20408"', f'"{lab.coordinator}"')
        .replace("~/.cache/et-harness/labgrid-lab/", f"{lab.known_hosts.parent}/")
        .replace("connect: 60", "connect: 20")
    )
    directory = tmp_path / "devices"
    directory.mkdir()
    (directory / "lab-linux-board.yaml").write_text(text)
    return directory


def _run(devices: Path, results: Path, selection: list[str], *args: str) -> subprocess.Popen:
    env = {k: v for k, v in run_environment().items() if k not in ("LG_USERNAME", "LG_HOSTNAME")}
    argv = [sys.executable, "-m", "pytest", *selection, "-p", "no:cacheprovider"]
    argv += ["--devices-dir", str(devices), "--results-dir", str(results)]
    argv += ["--lock-dir", str(results.parent / "locks"), "--device", "lab-linux-board", *args]
    return subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def _finish(run: subprocess.Popen, timeout: float = 300) -> str:
    try:
        return run.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        pytest.fail(f"the run did not end within {timeout} s:\n{run.communicate()[0][-3000:]}")


def _records(results: Path) -> list[dict]:
    return [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]


def _board(lab: LabgridLab, place: str):
    return next(p.board for p in lab.linux_board_places if p.name == place)


def test_a_pool_run_on_two_workers_holds_one_booted_board_each_through_its_place(
    lab, devices, tmp_path
):
    wanted = "load_time_map_each_backend and program and not 7-backends and not 8-backends"
    run = _run(devices, tmp_path / "r", ["suites/test_dispatch.py", "-k", wanted], "-n", "2")
    output = _finish(run)
    assert run.returncode == 0, output[-3000:]
    records = _records(tmp_path / "r")
    assert len(records) == 6 and {r["outcome"] for r in records} == {"passed"}, output[-3000:]
    holders = {(r["facts"]["holder"], r["facts"]["place"]) for r in records}
    assert {place for _, place in holders} == {"boot-a", "boot-b"}, holders  # one each
    assert len({holder for holder, _ in holders}) == 2, holders  # ... by its own worker
    assert {r["facts"]["abi"] for r in records} == {"aarch64"}
    for place in ("boot-a", "boot-b"):  # the agent ran on the board's own kernel
        assert "login:" in _board(lab, place).board.console_log.read_text(errors="replace")
    assert all(not s.acquired for s in parse_places(lab))


def test_a_power_cut_mid_run_is_power_cycled_through_the_place_and_the_run_goes_on(
    lab, devices, tmp_path
):
    with in_flight(tmp_path, after=3) as (selection, held):
        run = _run(devices, tmp_path / "r", selection)
        place = place_of(lab, held())
        powered = _board(lab, place)
        boots_before = powered.board.console_log.read_text(errors="replace").count("login:")
        lab.cut_power(place)  # the lab's switch off: dark until someone switches it on
    output = _finish(run)
    assert run.returncode == 0, output[-3000:]
    records = _records(tmp_path / "r")
    assert [r["outcome"] for r in records] == ["passed"] * 4, output[-3000:]
    first = records[0]
    assert "in_flight" in first["nodeid"] and first["facts"]["place"] == place, first
    (failed,) = first["failed_tries"]  # the cut try, an infrastructure error, retried once
    assert failed.startswith("TransportLost: "), failed
    assert powered.powered and powered.boot_error is None
    # switched on by the harness (labgrid's power driver): the board booted again
    assert powered.board.console_log.read_text(errors="replace").count("login:") > boots_before
    restarts = [line for r in records for line in r.get("emulator_restarts") or ()]
    assert restarts == [restarts[0]], restarts  # one power cycle, through labgrid
    assert restarts[0].startswith("restart 1 of 2: power cycle: the health check before a retry")
    state = next(s for s in parse_places(lab) if s.name == place)
    assert dict(state.tags)["et_health"] == "ok" and not state.acquired, state


def test_a_board_that_does_not_come_back_is_quarantined_and_the_run_goes_on_on_the_next(
    lab, devices, tmp_path
):
    with in_flight(tmp_path, after=2) as (selection, held):
        run = _run(devices, tmp_path / "r", selection, "--emulator-restarts", "1")
        place = place_of(lab, held())
        powered = _board(lab, place)
        lab.cut_power(place)
        with powered.board.flash.open("r+b") as flash:  # no file system left to boot
            flash.write(b"\0" * (4 << 20))
    try:
        output = _finish(run)
        state = next(s for s in parse_places(lab) if s.name == place)
    finally:
        powered.power(False)
        powered.board.flash.unlink()  # a fresh copy of the image's flash at its next boot
        powered.power(True)
        set_place(lab, place, tags={"et_health": "ok"}, comment="")
    assert run.returncode == 0, output[-3000:]
    records = _records(tmp_path / "r")
    assert [r["outcome"] for r in records] == ["passed"] * 3, output[-3000:]
    other = {"boot-a": "boot-b", "boot-b": "boot-a"}[place]
    assert records[0]["failed_tries"] and records[0]["facts"]["place"] == other, records[0]
    assert dict(state.tags)["et_health"] == "quarantined", state
    (line,) = state.comment.splitlines()
    assert "power cycle 1 failed" in line and "did not answer within 20 s" in line, line
    # what the place's console printed while the board did not come back: the test's artifact
    (console,) = [p for p in records[0]["artifacts"] if p.endswith("/device/console.log")]
    assert "; kept: " in line, line  # named (the lab's comment is bounded: cut after it)
    printed = (tmp_path / "r" / console).read_text(errors="replace")
    assert "Booting Linux" in printed and "et-init: boot failed" in printed, printed[-2000:]
