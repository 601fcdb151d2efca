"""Real emulated devices die in the middle of a farm run, next to a healthy one.

One pytest subprocess over ``host`` and one emulated device of each kind (ssh-emu
with real OpenSSH, adb-emu with the adbd stand-in behind the real adb client,
mcu-emu in QEMU), one xdist worker each. From its fifth test on, every
test kills its device's emulator (sshd and every session it serves, the adbd
stand-in, QEMU) while its agent runs, as a power cut would; a board the harness
powers up again for a retry (QEMU) dies again. So the moment of death is exact, not
timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from run_environment import run_environment

CASES = """\
import pytest

from harness.data.options import OptionsMap


@pytest.mark.parametrize("n", range(8))
def test_set(et, device, n):
    et.prepare(["ProbeA"])  # the agent runs (a board the harness restarted is up again)
    if n >= 4 and device.emulator is not None:
        device.emulator.kill()
    et.set(OptionsMap.from_dict({"ProbeA": {"k": n}})).raise_for_differences()
"""

EMULATED = ("adb-emu", "mcu-emu", "ssh-emu")


@pytest.mark.slow
def test_killed_emulated_devices_end_their_tests_as_infra_and_the_host_finishes_green(tmp_path):
    (tmp_path / "test_cases.py").write_text(CASES)
    results = tmp_path / "results"
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
            ",".join(("host", *EMULATED)),
            "-n",
            "4",
            "--infra-retries",
            "1",
            "--lock-dir",
            str(tmp_path / "locks"),
            "--results-dir",
            str(results),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # device trouble: not green, no crash
    assert "INTERNALERROR" not in run.stdout + run.stderr
    outcomes: dict[str, dict[int, str]] = {}
    kinds: dict[str, set[str]] = {}
    for line in (results / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        n = int(record["nodeid"].rsplit("-", 1)[1].rstrip("]"))
        outcomes.setdefault(record["device"], {})[n] = record["outcome"]
        if record["infra"]:
            kinds.setdefault(record["device"], set()).add(record["infra"]["type"])
    assert outcomes["host"] == dict.fromkeys(range(8), "passed"), run.stdout
    for device in EMULATED:  # every test has its result, none crashed the session
        expected = {n: "passed" if n < 4 else "infra" for n in range(8)}
        assert outcomes[device] == expected, (device, run.stdout)
    assert kinds["mcu-emu"] <= {
        "TransportLost",
        "TransportTimeout",
        "SerialProtocolError",
        "DeviceUnavailable",
    }, kinds
    assert "quarantined: ssh-emu" in run.stdout
    assert Path(results / "report.html").is_file()
    run_info = json.loads((results / "run.json").read_text())
    assert run_info["exit_status"] == 1
