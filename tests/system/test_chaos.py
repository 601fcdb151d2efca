"""The chaos run (issue #50, item 6): its schedule comes from the seed alone, a short seeded
run over the emulated devices ends with its invariants held, and the invariant check
fails on a planted wrong verdict, a planted lost result and a planted leftover process."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prerequisites import require
from run_environment import run_environment

from harness.chaos.faults import fault_targets
from harness.chaos.invariants import (
    Injection,
    Round,
    junit_key,
    no_lost_result,
    no_wrong_verdict,
    nothing_left_running,
    same_faults,
)
from harness.chaos.report import ChaosRecord
from harness.chaos.schedule import QUIET_END, WARM_UP_S, Fault, plan
from harness.lifecycle.reap import MARKER_VARIABLE, OwnerRecord, boot_id
from harness.profiles.device_profile import load_profile
from harness.results.records import CaseResult, InfraRecord

REPO = Path(__file__).resolve().parents[1]
EMULATED = ("host", "ssh-emu", "adb-emu", "mcu-emu", "mcu-m55-emu")
PAIRS = [("kill-sshd", "ssh-emu"), ("kill-qemu-mcu", "mcu-emu"), ("fill-disk", "results")]


def test_the_same_seed_gives_the_same_faults_and_another_seed_others():
    first = plan(1234, 600, PAIRS)
    assert first == plan(1234, 600, list(reversed(PAIRS)))  # the pairs' order does not count
    assert first != plan(1235, 600, PAIRS)
    assert len(first) == round((600 * (1 - QUIET_END) - WARM_UP_S) / 15)
    assert all(WARM_UP_S <= f.at_s <= 600 * (1 - QUIET_END) for f in first)
    assert [f.at_s for f in first] == sorted(f.at_s for f in first)
    assert {(f.kind, f.target) for f in first} == set(PAIRS)
    assert plan(1234, 600, PAIRS, every_s=5) != first


def test_each_emulated_device_has_its_faults_and_the_disk_only_when_there_is_one():
    profiles = [load_profile(name) for name in EMULATED]
    with_disk = set(fault_targets(profiles, disk=True))
    assert with_disk - set(fault_targets(profiles, disk=False)) == {("fill-disk", "results")}
    assert with_disk == {
        ("kill-sshd", "ssh-emu"), ("drop-link", "ssh-emu"),
        ("kill-adb-server", "adb-emu"), ("kill-adbd", "adb-emu"), ("drop-link", "adb-emu"),
        ("kill-qemu-mcu", "mcu-emu"), ("drop-link", "mcu-emu"),
        ("kill-qemu-mcu", "mcu-m55-emu"), ("drop-link", "mcu-m55-emu"),
        ("fill-disk", "results"),
    }  # fmt: skip
    # the booted board (tagged boots, not emulated) has its power cut
    assert fault_targets([load_profile("linux-emu")], disk=False) == [("cut-power", "linux-emu")]


def _result(nodeid: str, outcome: str, started: float, **fields: object) -> CaseResult:
    device = nodeid.split("[", 1)[1].rsplit("-", 1)[0]
    return CaseResult(nodeid, device, outcome, 1.0, started, **fields)  # type: ignore[arg-type]


def _round(tmp_path: Path, results: list[CaseResult], finished: list[str] | None = None) -> Round:
    """A round's folder with ``results`` recorded and ``finished`` (default: the same
    tests) in its JUnit file."""
    folder = tmp_path / "round-1"
    folder.mkdir(parents=True)
    lines = "".join(result.to_json() + "\n" for result in results)
    (folder / "results.jsonl").write_text(lines, encoding="utf-8")
    cases = "".join(
        '<testcase classname="{}" name="{}"/>'.format(*junit_key(nodeid))
        for nodeid in (finished if finished is not None else [r.nodeid for r in results])
    )
    junit = tmp_path / "round-1.junit.xml"
    junit.write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')
    return Round(folder, junit, 1000.0, 2000.0)


LOST = InfraRecord("TransportLost", "ssh-emu: the connection was lost", "call")
QUARANTINED = InfraRecord("DeviceQuarantined", "ssh-emu failed its health check", "setup")
TIME_UP = InfraRecord(
    "DeviceQuarantined",
    "device 'adb-emu' failed the health check before its first test and is quarantined for "
    "the rest of this run: RunTimeExpired: the run's time is up (--run-timeout 44 s): ...",
    "setup",
)  # what a round's last seconds leave: not a fault's, not a wrong verdict
KILL = Injection(Fault(40.0, "kill-sshd", "ssh-emu"), 1100.0, ("SIGKILL 1 sshd",))


def test_an_infra_error_a_fault_explains_retried_or_quarantined_is_no_wrong_verdict(tmp_path):
    results = [
        _result("suites/test_a.py::test_x[ssh-emu-1]", "passed", 1099.0, failed_tries=("x",)),
        _result("suites/test_a.py::test_x[ssh-emu-2]", "infra", 1101.0, infra=LOST,
                failed_tries=(str(LOST),)),
        _result("suites/test_a.py::test_x[ssh-emu-3]", "infra", 1500.0, infra=QUARANTINED),
        _result("suites/test_a.py::test_x[host-1]", "skipped", 1500.0),
        _result("suites/test_a.py::test_x[adb-emu-1]", "infra", 1900.0, infra=TIME_UP),
    ]  # fmt: skip
    invariant = no_wrong_verdict([_round(tmp_path, results)], [KILL])
    assert invariant.held, invariant.lines()
    assert invariant.summary == (
        "2 passed or skipped (1 after a retry), 3 infra (1 as a round's time was up, "
        "2 after a fault), 0 failed"
    )


@pytest.mark.parametrize(
    ("planted", "why"),
    [
        (_result("suites/test_a.py::test_x[host-1]", "failed", 1101.0), "failed"),
        (_result("suites/test_a.py::test_x[host-1]", "infra", 1101.0, infra=LOST,
                 failed_tries=("x",)), "no fault on host explains it"),
        (_result("suites/test_a.py::test_x[ssh-emu-1]", "infra", 1500.0, infra=LOST,
                 failed_tries=("x",)), "no fault on ssh-emu explains it"),
        (_result("suites/test_a.py::test_x[ssh-emu-1]", "infra", 1101.0, infra=LOST),
         "neither retried nor quarantined"),
    ],
)  # fmt: skip
def test_a_planted_wrong_verdict_breaks_the_invariant(tmp_path, planted, why):
    invariant = no_wrong_verdict([_round(tmp_path, [planted])], [KILL])
    assert not invariant.held
    assert why in invariant.broken[0], invariant.broken


BOOT_CUT = InfraRecord(
    "LinuxEmulatorError",
    "linux-emu: boot and login failed: BrokenPipeError: [Errno 32] Broken pipe; console "
    "log: /cache/emulators/linux-emu-1/board/console.log",
    "setup",
)
POWER_CUT = Injection(Fault(53.2, "cut-power", "linux-emu"), 1100.0, ("SIGKILL 7 qemu",))


def test_a_failed_bring_up_that_quarantined_its_device_counts_as_quarantined(tmp_path):
    """The power cut hit the board as it booted for its first test: that test carries the
    boot's error, and the device's tests not started name it as the quarantine's cause."""
    failed = _result("suites/test_a.py::test_x[linux-emu-1]", "infra", 1101.0, infra=BOOT_CUT)
    reason = (
        "device 'linux-emu' is quarantined for the rest of this run: bring-up failed: "
        f"{BOOT_CUT.type}: {BOOT_CUT.message} (after 2 emulator restarts)"
    )
    not_started = _result(
        "suites/test_a.py::test_x[linux-emu-2]", "infra", 1105.0,
        infra=InfraRecord("DeviceQuarantined", reason, "setup"),
    )  # fmt: skip
    invariant = no_wrong_verdict([_round(tmp_path / "1", [failed, not_started])], [POWER_CUT])
    assert invariant.held, invariant.lines()
    # without the quarantine it caused, the same error was neither retried nor quarantined
    alone = no_wrong_verdict([_round(tmp_path / "2", [failed])], [POWER_CUT])
    assert not alone.held and "neither retried nor quarantined" in alone.broken[0]
    # a quarantine for another cause does not cover it
    other = InfraRecord("DeviceQuarantined", reason.replace("Broken pipe", "EOF"), "setup")
    elsewhere = dataclasses.replace(not_started, infra=other)
    assert not no_wrong_verdict([_round(tmp_path / "3", [failed, elsewhere])], [POWER_CUT]).held


PAIRS_BOARD = (("cut-power", "linux-emu"), ("fill-disk", "results"))


def test_faults_planned_after_the_last_round_are_not_reached_and_break_nothing():
    planned = plan(3, 150, PAIRS_BOARD, 20)
    assert [f.at_s for f in planned] == [53.2, 66.07, 83.06, 88.88, 91.01]
    rounds = [Round(Path("r1"), Path("r1.xml"), 1000.0, 1040.0),
              Round(Path("r2"), Path("r2.xml"), 1041.0, 1064.5)]  # fmt: skip
    first = Injection(planned[0], 1053.2, ("SIGKILL 7 qemu",))
    record = ChaosRecord(3, 150, 20, PAIRS_BOARD, (first,), tuple(rounds), ())
    invariant = record.invariants()[3]  # as et-harness chaos checks its run
    assert invariant.held, invariant.lines()
    assert invariant.summary == (
        "1 of 5 planned faults injected, in the seed's order; 4 not reached (after the "
        "last round ended, 64.50 s in)"
    )
    assert invariant.notes[0] == f"not reached: {planned[1].line().strip()}"
    assert len(invariant.notes) == 4 and invariant.lines()[2].startswith("    not reached: ")

    # a fault that was reachable and is missing, or one out of order, still breaks it
    later = [*rounds[:1], dataclasses.replace(rounds[1], ended=1085.0)]  # 85 s in
    missing = same_faults(planned, [first], later)
    assert not missing.held
    assert missing.broken == tuple(f"not injected: {f.line().strip()}" for f in planned[1:3])
    assert len(missing.notes) == 2
    swapped = [Injection(f, 1000.0 + f.at_s, ()) for f in (planned[1], planned[0])]
    assert not same_faults(planned, swapped, later).held
    skipped = [Injection(f, 1000.0 + f.at_s, ()) for f in (planned[0], planned[2])]
    assert not same_faults(planned, skipped, later).held


def test_a_finished_test_without_its_record_is_a_lost_result(tmp_path):
    kept = _result("suites/test_a.py::Test::test_x[host-1]", "passed", 1100.0)
    lost = "suites/test_a.py::Test::test_x[host-2]"
    invariant = no_lost_result([_round(tmp_path, [kept], [kept.nodeid, lost])])
    assert not invariant.held
    assert invariant.broken == ("suites.test_a.Test::test_x[host-2]: finished, not recorded",)
    assert invariant.summary == "2 tests finished, 1 of them recorded"


def test_a_process_the_run_started_and_left_is_found(tmp_path):
    owner = OwnerRecord(f"{os.getpid()}-chaostest", 1, 1, boot_id(), "here")
    assert nothing_left_running([owner], []).held
    env = {**os.environ, MARKER_VARIABLE: owner.owner}
    left = subprocess.Popen(["sleep", "300"], env=env)
    try:
        invariant = nothing_left_running([owner], [])
        assert not invariant.held
        assert invariant.broken == (f"process {left.pid} of {owner.owner}: sleep 300 ",)
    finally:
        left.kill()
        left.wait()


def _chaos(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = run_environment(ET_HARNESS_HISTORY="off")
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "chaos", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.nightly  # ~100 s of CPU: over README's test command's budget (docs/chaos.md)
def test_a_short_seeded_chaos_run_holds_its_invariants_and_the_check_can_fail(tmp_path):
    """90 s of the suites on three emulated devices (the first 30 s bring them up), a
    fault every 4 s after that, rounds after rounds while 15 s are left (a warm round can
    end before the first fault): the seed's schedule, its invariants held; then a wrong
    verdict planted in its results, and a process left with one of its owners' marker,
    each break the check."""
    require("sshd", "qemu-system-arm", "ss", "mount", root=True)
    folder = tmp_path / "chaos"
    args = ("--duration", "90", "--seed", "5", "--fault-every", "4", "--min-round", "15",
            "--device", "host,ssh-emu,mcu-emu", "--results-dir", str(folder))  # fmt: skip
    run = _chaos(*args, timeout=420)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    planned = re.findall(r"^ +([\d.]+) s  (\S+) +(\S+)$", run.stdout, re.M)
    targets = [("kill-sshd", "ssh-emu"), ("drop-link", "ssh-emu"), ("fill-disk", "results"),
               ("kill-qemu-mcu", "mcu-emu"), ("drop-link", "mcu-emu")]  # fmt: skip
    assert planned == [(f"{f.at_s:.2f}", f.kind, f.target) for f in plan(5, 90, targets, 4)]
    assert re.search(r"^chaos: seed 5, 90 s, \d+ round\(s\): invariants held$", run.stdout, re.M), (
        output
    )
    record = json.loads((folder / "chaos.json").read_text())
    assert sum(bool(i["hit"]) for i in record["injected"]) >= 1, output
    what = {  # each fault hit what it is for, on its own device
        ("kill-sshd", "ssh-emu"): r"SIGKILL \d+ sshd: ",
        ("drop-link", "ssh-emu"): r"SIGKILL \d+ socat .*TCP:127\.0\.0\.1:22",
        ("kill-qemu-mcu", "mcu-emu"): r"SIGKILL \d+ qemu-system-arm -M mps2-an385 ",
        ("drop-link", "mcu-emu"): r"cut TCP 127\.0\.0\.1:\d+ 127\.0\.0\.1:\d+",
        ("fill-disk", "results"): rf"filled {folder / 'disk'} \(\d+ bytes more\)",
    }
    for injected in record["injected"]:
        pattern = what[injected["kind"], injected["target"]]
        assert all(re.fullmatch(f"{pattern}.*", hit) for hit in injected["hit"]), injected

    held = _chaos("--check", str(folder), timeout=60)
    assert held.returncode == 0 and "invariants held" in held.stdout, held.stdout

    with open(folder / "round-1" / "results.jsonl", "a", encoding="utf-8") as results:
        results.write(_result("suites/test_a.py::test_x[host-1]", "failed", 0.0).to_json() + "\n")
    wrong = _chaos("--check", str(folder), timeout=60)
    assert wrong.returncode == 1, wrong.stdout
    assert "BROKEN no wrong verdict" in wrong.stdout
    assert "suites/test_a.py::test_x[host-1]: failed" in wrong.stdout

    owner = record["owners"][0]["owner"]
    left = subprocess.Popen(["sleep", "300"], env={**os.environ, MARKER_VARIABLE: owner})
    try:
        leftover = _chaos("--check", str(folder), timeout=60)
    finally:
        left.kill()
        left.wait()
    assert leftover.returncode == 1, leftover.stdout
    assert f"process {left.pid} of {owner}: sleep 300" in leftover.stdout
