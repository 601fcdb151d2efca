"""An emulated device whose emulator does not come up is started again before it is
quarantined (a chaos power cut that hits the board while it boots).

The farm's own slot on ssh-emu, with an emulator double whose first starts fail the way
a cut boot does (:class:`SshEmulatorError`); later starts are the real sshd. The restarts
are counted against ``--emulator-restarts`` and reported like those after a failed
health check; a device whose restarts are used up is quarantined with the error of the
step that failed, what each failed start carried (a console log) kept as the test's
artifact and named in those lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prerequisites import require

from harness.devices.host_tools import MissingHostTool
from harness.emulators.ssh import SshEmulator, SshEmulatorError
from harness.farm.device_health import DeviceQuarantined
from harness.farm.lock import DeviceBusy, DeviceLock, device_key
from harness.farm.policy import FarmPolicy
from harness.farm.slot import DeviceSlot
from harness.profiles.device_profile import load_profile
from harness.transport.base import TransportLost

CUT = "ssh-emu: boot and login failed: BrokenPipeError: [Errno 32] Broken pipe"


def _failing_starts(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[Path]:
    """The first ``failures`` starts of ssh-emu fail as a cut boot does; the directories
    of every start, in order."""
    real, starts = SshEmulator.start, []

    def start(emulator: SshEmulator) -> dict[str, object]:
        starts.append(emulator.directory)
        if len(starts) <= failures:
            raise SshEmulatorError(f"{CUT} (start {len(starts)})")
        return real(emulator)

    monkeypatch.setattr(SshEmulator, "start", start)
    return starts


def _slot(tmp_path: Path, restarts: int) -> DeviceSlot:
    policy = FarmPolicy(emulator_restarts=restarts, lock_dir=tmp_path / "locks")
    return DeviceSlot(load_profile("ssh-emu"), policy)


def test_a_bring_up_whose_emulator_failed_to_start_starts_it_again(tmp_path, monkeypatch):
    require("sshd", root=True)
    starts = _failing_starts(monkeypatch, 1)
    slot = _slot(tmp_path, 2)
    try:
        device = slot.open()
        assert device.emulator is not None and len(starts) == 2
        assert slot.facts["agent_version"] and not slot.health.quarantined
        assert slot.restarts.new() == [
            f"restart 1 of 2: bring-up failed: SshEmulatorError: {CUT} (start 1)"
        ]
    finally:
        slot.close()


def test_a_device_that_still_does_not_come_up_is_quarantined_after_the_restarts_allowed(
    tmp_path, monkeypatch
):
    require("sshd", root=True)
    for restarts in (2, 0):
        starts = _failing_starts(monkeypatch, 3)
        slot = _slot(tmp_path, restarts)
        with pytest.raises(SshEmulatorError, match=rf"\(start {restarts + 1}\)"):
            slot.open()
        assert len(starts) == restarts + 1  # the first start, and the restarts allowed
        after = f" (after {restarts} emulator restarts)" if restarts else ""
        assert slot.health.quarantine_reason == (
            f"bring-up failed: SshEmulatorError: {CUT} (start {restarts + 1}){after}"
        )
        assert [r.split(":", 1)[0] for r in slot.restarts.new()] == [
            f"restart {n} of {restarts}" for n in range(1, restarts + 1)
        ]
        with pytest.raises(DeviceQuarantined, match="boot and login failed"):
            slot.open()

    # a program missing on this machine would be missing again: no restart for it
    import harness.devices.bring_up as bring_up

    checks = []

    def missing(*args: object) -> None:
        checks.append(args)
        raise MissingHostTool("sshd not found: install openssh-server")

    monkeypatch.setattr(bring_up, "check_host_tools", missing)
    slot = _slot(tmp_path, 2)
    with pytest.raises(MissingHostTool):
        slot.open()
    assert len(checks) == 1 and slot.restarts.new() == []
    assert slot.health.quarantined

    # nor a device another run holds: its lock is waited for once
    profile = load_profile("ssh-emu")
    other = DeviceLock(profile.name, tmp_path / "locks", device_key(profile))
    other.acquire(timeout=1)
    try:
        policy = FarmPolicy(emulator_restarts=2, lock_timeout=0.2, lock_dir=tmp_path / "locks")
        slot = DeviceSlot(profile, policy)
        with pytest.raises(DeviceBusy):
            slot.open()
    finally:
        other.release()
    assert slot.restarts.new() == [] and "DeviceBusy" in str(slot.health.quarantine_reason)


def test_an_emulator_restart_whose_start_failed_is_made_again(tmp_path, monkeypatch):
    """The emulator died mid-run; its first restart's start fails too (the power cut hit
    its boot): the next restart brings it up, and the test's retry passes."""
    require("sshd", root=True)
    slot = _slot(tmp_path, 3)
    try:
        device = slot.open()
        assert device.emulator is not None and slot.runner is not None
        device.emulator.kill()
        starts = _failing_starts(monkeypatch, 1)
        tries: list[BaseException] = []
        slot.retry(slot.runner.reset, TransportLost("the agent's link was lost"), tries,
                   lambda error, attempt: None)  # fmt: skip
        assert len(starts) == 2 and len(tries) == 1 and not slot.health.quarantined
        restarts = slot.restarts.new()
        assert [r.split(": ", 2)[:2] for r in restarts] == [
            ["restart 1 of 3", "the health check before a retry failed"],
            ["restart 2 of 3", "emulator restart 1 failed"],
        ], restarts
        assert f"{CUT} (start 1)" in restarts[1]
    finally:
        slot.close()


def test_what_a_failed_start_carries_is_kept_as_the_tests_artifact_and_named(tmp_path, monkeypatch):
    """The emulator's directory goes as the device closes: the console log a failed start
    carries (InfrastructureError.kept) is kept first, in the current test's artifacts,
    and every line names the kept copy, not the gone original."""
    from harness.results.artifacts import CrashArtifacts

    require("sshd", root=True)
    logs: list[Path] = []

    def start(emulator: SshEmulator) -> dict[str, object]:
        log = emulator.directory / "console.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"boot {len(logs) + 1}: no login prompt\n")
        logs.append(log)
        error = SshEmulatorError(f"{CUT}; console log: {log}")
        error.kept = ((str(log), log.read_bytes()),)
        raise error

    monkeypatch.setattr(SshEmulator, "start", start)
    results = tmp_path / "results"
    artifacts = CrashArtifacts(results, "ssh-emu", "test_x[ssh-emu]")
    slot = _slot(tmp_path, 1)
    slot.begin_test(artifacts)
    with pytest.raises(SshEmulatorError) as failure:
        slot.open()
    assert len(logs) == 2 and not any(log.exists() for log in logs)  # closed: gone
    device = results / "artifacts" / "ssh-emu" / "test_x_ssh-emu_" / "device"
    first, second = device / "console.log", device / "console-2.log"
    assert first.read_text() == "boot 1: no login prompt\n"
    assert second.read_text() == "boot 2: no login prompt\n"
    assert artifacts.paths == [str(p.relative_to(results)) for p in (first, second)]
    assert artifacts.repoint(str(failure.value)) == f"{CUT}; console log: {second}"
    (restart,) = slot.restarts.new()
    assert restart.endswith(f"{CUT}; console log: {first}"), restart
    assert slot.health.quarantine_reason == (
        f"bring-up failed: SshEmulatorError: {CUT}; console log: {second} "
        "(after 1 emulator restart)"
    )


def test_an_emulator_restart_that_fails_quarantines_naming_the_kept_console_log(
    tmp_path, monkeypatch
):
    """The emulator died mid-run and no restart brings it up: the device is quarantined,
    each failed start's console log kept as the test's artifact and named in the line."""
    from harness.results.artifacts import CrashArtifacts

    require("sshd", root=True)
    results = tmp_path / "results"
    artifacts = CrashArtifacts(results, "ssh-emu", "test_y[ssh-emu]")
    slot = _slot(tmp_path, 1)
    try:
        device = slot.open()
        assert device.emulator is not None and slot.runner is not None
        slot.begin_test(artifacts)
        device.emulator.kill()

        def start(emulator: SshEmulator) -> dict[str, object]:
            log = emulator.directory / "console.log"
            log.write_text("no login prompt\n")
            error = SshEmulatorError(f"{CUT}; console log: {log}")
            error.kept = ((str(log), log.read_bytes()),)
            raise error

        monkeypatch.setattr(SshEmulator, "start", start)
        with pytest.raises(DeviceQuarantined) as failure:
            slot.retry(slot.runner.reset, TransportLost("the agent's link was lost"), [],
                       lambda error, attempt: None)  # fmt: skip
    finally:
        slot.close()
    kept = results / "artifacts" / "ssh-emu" / "test_y_ssh-emu_" / "device" / "console.log"
    assert kept.read_text() == "no login prompt\n"
    assert str(failure.value).startswith(
        "device 'ssh-emu' failed the health check before a retry, and its emulator restart 1 "
        f"failed: DeviceSetupError: ssh-emu: its emulator did not start again: {CUT}; "
        f"console log: {kept}; it is quarantined"
    ), failure.value
    assert str(kept) in str(slot.health.quarantine_reason)
