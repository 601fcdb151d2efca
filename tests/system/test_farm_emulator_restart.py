"""A lost emulator comes back (issue #24, fault 2).

One pytest run over ssh-emu and adb-emu, one xdist worker each. The third test of
each device kills its emulator (sshd and every session it serves; the adbd stand-in)
while its agent runs, once. The harness restarts that emulator before the test's
retry (a health check first, and after), so the test passes on its retry and the
tests after it run; the restart is in the summary, the results and JUnit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from prerequisites import require
from run_environment import run_environment

CASES = """\
from pathlib import Path

import pytest

from harness.data.options import OptionsMap


@pytest.mark.parametrize("n", range(5))
def test_set(et, device, n):
    et.prepare(["ProbeA"])  # the agent runs
    killed = Path({flags!r}) / device.name
    if n == 2 and not killed.exists():
        killed.write_text("")
        device.emulator.kill()  # once: the retry finds it dead
    et.set(OptionsMap.from_dict({{"ProbeA": {{"k": n}}}})).raise_for_differences()
"""

EMULATED = ("adb-emu", "ssh-emu")


@pytest.mark.slow
def test_a_killed_emulator_is_restarted_and_the_tests_after_it_run(tmp_path):
    require("adb", "qemu-aarch64", "sshd", root=True)
    flags = tmp_path / "flags"
    flags.mkdir()
    (tmp_path / "test_cases.py").write_text(CASES.format(flags=str(flags)))
    results, junit = tmp_path / "results", tmp_path / "junit.xml"
    env = run_environment()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_cases.py",
            "-p",
            "no:cacheprovider",
            "--device",
            ",".join(EMULATED),
            "-n",
            "2",
            "--lock-dir",
            str(tmp_path / "locks"),
            "--results-dir",
            str(results),
            f"--junitxml={junit}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert sorted(p.name for p in flags.iterdir()) == list(EMULATED)  # each was killed
    records = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    for device in EMULATED:
        mine = {
            r["nodeid"].rsplit("-", 1)[1].rstrip("]"): r for r in records if r["device"] == device
        }
        assert {n: r["outcome"] for n, r in mine.items()} == dict.fromkeys("01234", "passed")
        restarted = mine["2"]
        assert len(restarted["failed_tries"]) == 1, restarted
        assert [r.split(":", 1)[0] for r in restarted["emulator_restarts"]] == ["restart 1 of 2"], (
            restarted
        )
        assert "the health check before a retry failed" in restarted["emulator_restarts"][0]
        assert all(not mine[n]["emulator_restarts"] for n in "0134")
        assert f"emulator restarted: {device}: test_set[{device}-2]: restart 1 of 2" in output
    properties = [
        (case.get("name", ""), prop.get("value", ""))
        for case in ET.parse(junit).getroot().iter("testcase")
        for prop in case.iter("property")
        if prop.get("name") == "emulator_restart"
    ]
    assert sorted(name for name, _ in properties) == [f"test_set[{d}-2]" for d in EMULATED]
    assert "quarantined" not in output
