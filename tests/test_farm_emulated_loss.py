"""A real emulated device dies in the middle of a farm run, next to a healthy one.

The run is a pytest subprocess over ``host`` and ``ssh-emu`` (real OpenSSH, the arm64
runtime under qemu-user), one xdist worker each. A test kills ssh-emu's sshd and every
session it serves (as a power cut would) in the middle of the run, so the moment of
death is exact, not timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

CASES = '''\
import pytest

from harness.options import OptionsMap


@pytest.mark.parametrize("n", range(10))
def test_set(et, device, n):
    if n == 4 and device.emulator is not None:
        device.emulator.kill()
    et.set(OptionsMap.from_dict({"ProbeA": {"k": n}})).raise_for_differences()
'''


def test_killed_emulated_device_is_quarantined_and_the_other_finishes_green(tmp_path):
    (tmp_path / "test_cases.py").write_text(CASES)
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "test_cases.py", "-p", "no:cacheprovider",
         "--device", "host,ssh-emu", "-n", "2", "--infra-retries", "1",
         "--lock-dir", str(tmp_path / "locks"), "--results-dir", str(results)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    elapsed = time.monotonic() - started
    outcomes: dict[str, list[str]] = {}
    for line in (results / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        outcomes.setdefault(record["device"], []).append(record["outcome"])
    assert outcomes["host"] == ["passed"] * 10, run.stdout
    assert sorted(outcomes["ssh-emu"]) == ["infra"] * 6 + ["passed"] * 4, run.stdout
    assert "quarantined: ssh-emu" in run.stdout
    assert run.returncode != 0  # device trouble is never a green run
    assert elapsed < 120, f"the run took {elapsed:.0f} s"
    assert Path(results / "report.html").is_file() and Path(results / "results.jsonl").is_file()
