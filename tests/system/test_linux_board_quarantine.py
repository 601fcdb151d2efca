"""linux-emu: a board that does not come back names the step that failed (boot, login,
SSH, agent) in one line, and a run that quarantines it keeps its console log, up to the
failure, as the failing test's artifact, the line naming the kept copy (its emulator's
directory goes as the device closes).

Each test boots a board (seconds of a core under QEMU's TCG): marked nightly, run by the
nightly workflow's board job beside tests/system/test_linux_board.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prerequisites import require
from run_environment import run_environment

import harness.emulators.linux_strategy as strategy
from harness.emulators.linux import LinuxEmulator, LinuxEmulatorError
from harness.emulators.linux_image import BoardImage
from harness.shipped import devices_dir

BOARD_TOOLS = ("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
KERNEL_BOOTS = "Booting Linux on physical CPU"  # the kernel's first line on the console
NO_FLASH = "et-init: boot failed: cannot mount the flash"  # the initramfs, on a damaged flash


def _damage_flash(board: LinuxEmulator) -> None:
    board.directory.mkdir(parents=True, exist_ok=True)
    board.flash.write_bytes(b"\0" * (1 << 20))  # no file system at all


def _log_in_as_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    made = LinuxEmulator._environment_config

    def config(board: LinuxEmulator, image: BoardImage, seed: Path) -> dict[str, Any]:
        found: dict[str, Any] = made(board, image, seed)
        found["targets"]["main"]["drivers"]["ShellDriver"]["username"] = "nobody"
        return found

    monkeypatch.setattr(LinuxEmulator, "_environment_config", config)


def _stop_sshd_starting(board: LinuxEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strategy, "SSHD", "/bin/false")


# The step that fails, how it is made to, and what the console shows of it.
STEPS = {
    # the kernel boots, the initramfs finds no file system on the flash: no login prompt
    "boot": (lambda board, patch: _damage_flash(board), NO_FLASH),
    # the login prompt comes, but the user it logs in as has no account: no shell
    "login": (lambda board, patch: _log_in_as_nobody(patch), "login:"),
    # logged in as root on the console, but its OpenSSH server does not start
    "SSH": (_stop_sshd_starting, "root@linux-emu"),
}


@pytest.mark.nightly
@pytest.mark.parametrize("step", STEPS)
def test_each_step_that_fails_is_named_and_its_error_carries_the_console_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
):
    require(*BOARD_TOOLS)
    board = LinuxEmulator(tmp_path / "board", boot_timeout=10)
    break_it, printed = STEPS[step]
    break_it(board, monkeypatch)
    with pytest.raises(LinuxEmulatorError) as failure:
        board.start()
    message = str(failure.value)
    assert message.startswith(f"linux-emu: {step} failed: ") and "\n" not in message, message
    assert message.endswith(f"; console log: {board.console_log}"), message
    ((path, console),) = failure.value.kept  # the log, as it was when the step failed
    assert path == str(board.console_log) and console == board.console_log.read_bytes()
    assert KERNEL_BOOTS in console.decode() and printed in console.decode()


CASES = """\
def test_first(et):
    et.prepare(["ProbeA"])


def test_second(et):
    et.prepare(["ProbeA"])
"""

DAMAGED_FLASH = """\
import harness.emulators.linux as linux


def _damaged(image, flash):
    flash.write_bytes(b"\\0" * (1 << 20))  # the board's flash, with no file system at all


linux._copy_sparse = _damaged
"""


def _farm_run(folder: Path, *options: str, **env: str) -> tuple[str, list[dict], Path]:
    """The cases on ``folder``'s device in a pytest of their own: its output, its records
    and its results directory."""
    (folder / "test_cases.py").write_text(CASES)
    results = folder / "results"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "test_cases.py", "-p", "no:cacheprovider",
         "--results-dir", str(results), *options],
        cwd=folder, env={**run_environment(), **env}, capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    output = run.stdout + run.stderr
    records = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    return output, records, results


def _kept_console(line: str, results: Path) -> Path:
    """The console log ``line`` names: a file in the results directory."""
    (named,) = re.findall(r"(/\S+/console(?:-\d+)?\.log)", line)
    path = Path(named)
    assert path.is_relative_to(results) and path.is_file(), line
    return path


@pytest.mark.nightly
def test_a_board_that_cannot_boot_is_quarantined_with_its_console_log_as_the_tests_artifact(
    tmp_path: Path,
):
    require(*BOARD_TOOLS)
    (tmp_path / "conftest.py").write_text(DAMAGED_FLASH)
    output, records, results = _farm_run(
        tmp_path, "--device", "linux-emu", "--emulator-restarts", "1"
    )
    assert [r["outcome"] for r in records] == ["infra", "infra"], output[-3000:]
    first, second = records
    # The test whose setup booted the board: its own error, the console log kept
    message = first["infra"]["message"]
    assert first["infra"]["type"] == "LinuxEmulatorError", first["infra"]
    assert message.startswith("linux-emu: boot failed: ") and "\n" not in message, message
    console = _kept_console(message, results)
    assert KERNEL_BOOTS in console.read_text() and NO_FLASH in console.read_text()
    # ... and the first boot's, whose failure restarted it, each a file of the test's
    (restart,) = first["emulator_restarts"]
    assert restart.startswith("restart 1 of 1: bring-up failed: LinuxEmulatorError: linux-emu: ")
    earlier = _kept_console(restart, results)
    assert earlier != console and NO_FLASH in earlier.read_text()
    kept = {str(results / path) for path in first["artifacts"]}
    assert {str(console), str(earlier)} <= kept, first["artifacts"]
    # The quarantine's one line, on the next test and at the run's end, names the kept copy
    reason = second["infra"]["message"]
    assert second["infra"]["type"] == "DeviceQuarantined"
    assert "bring-up failed: LinuxEmulatorError: linux-emu: boot failed: " in reason, reason
    assert _kept_console(reason, results) == console
    (said,) = [line for line in output.splitlines() if line.startswith("quarantined: linux-emu:")]
    assert _kept_console(said, results) == console


@pytest.mark.nightly
def test_a_board_whose_agent_does_not_start_is_quarantined_naming_the_agent(tmp_path: Path):
    require(*BOARD_TOOLS)
    devices = tmp_path / "devices"
    devices.mkdir()
    profile = (devices_dir() / "linux-emu.yaml").read_text()
    assert "\nagent:\n" in profile
    profile = profile.replace("\nagent:\n", "\nagent:\n  wrapper: [/bin/false]\n")  # no agent
    (devices / "no-agent.yaml").write_text(profile)
    output, records, results = _farm_run(
        tmp_path, "--device", "no-agent", "--devices-dir", str(devices),
        "--emulator-restarts", "0", ET_HARNESS_TRUSTED_PROFILES=str(devices),
    )  # fmt: skip
    assert [r["outcome"] for r in records] == ["infra", "infra"], output[-3000:]
    message = records[0]["infra"]["message"]
    assert message.startswith(
        "device 'no-agent' failed the health check before its first test and is quarantined"
    ), message
    assert "(its agent did not answer HELLO); kept: " in message and "\n" not in message
    console = _kept_console(message, results)  # the board booted: its log, to the end
    assert KERNEL_BOOTS in console.read_text() and "login:" in console.read_text()
    assert str(console.relative_to(results)) in records[0]["artifacts"]
    reason = records[1]["infra"]["message"]
    assert (
        "(its agent did not answer HELLO)" in reason and _kept_console(reason, results) == console
    )
