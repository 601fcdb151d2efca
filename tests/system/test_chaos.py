"""The chaos run (issue #50, item 6): its schedule comes from the seed alone, a short seeded
run over the emulated devices ends with its invariants held, and the invariant check
fails on a planted wrong verdict, a planted lost result and a planted leftover process."""

from __future__ import annotations

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
)
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
    folder.mkdir()
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


@pytest.mark.slow
def test_a_short_seeded_chaos_run_holds_its_invariants_and_the_check_can_fail(tmp_path):
    """90 s of the suites on three emulated devices (the first 30 s bring them up), a
    fault every 4 s after that: the seed's schedule, its invariants held; then a wrong
    verdict planted in its results, and a process left with one of its owners' marker,
    each break the check."""
    require("sshd", "qemu-system-arm", "ss", "mount", root=True)
    folder = tmp_path / "chaos"
    args = ("--duration", "90", "--seed", "5", "--fault-every", "4", "--device",
            "host,ssh-emu,mcu-emu", "--results-dir", str(folder))  # fmt: skip
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
