"""One device as a run uses it: held, brought up, health-checked, restarted, quarantined.

A :class:`DeviceSlot` takes the device's lock (and labgrid place), brings the
device up, starts its agent and checks it answers HELLO before the first test.
It restarts the agent between tries of a test after an infrastructure error,
re-checks the device after consecutive infrastructure errors, and quarantines it
when a check fails. An emulated device (the harness's own emulator) is checked
before every retry too, and one that fails a check, or whose bring-up or emulator
restart failed (a board's boot cut short), has its emulator started again and is
checked again, up to ``emulator_restarts`` times a run, before it is quarantined
(:mod:`harness.farm.restarts`). A real device is never restarted, but a lab board whose
profile asks ``recover: power`` is checked before every retry, and one that fails a
check has its place's power cycled and is waited for while it boots, counted the same
way. A lab pool's board (a profile that
asks for any place with some tags) is checked before every retry as well; one that
fails a check is taken out (lab-wide with ``quarantine: lab``) and handed back, and the
slot holds another place of the pool, where its runner goes on: the device is
quarantined only when no place is left. A place lost meanwhile (a coordinator restart
forgets every acquisition) is held again before the next test; so is a place whose
resources changed when its board's check failed (its exporter restarted: a serial port
on a new network port). It keeps the sessions it
started so that a failing test can show the agent's stderr.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.devices.base import Device
from harness.devices.host_tools import MissingHostTool
from harness.farm.device_health import DeviceHealth, DeviceQuarantined
from harness.farm.lock import DeviceLock, device_key
from harness.farm.policy import FarmPolicy
from harness.farm.restarts import EMULATOR_RESTART, Restarts, board_restart
from harness.farm.runtime_served import check_announced_runtime
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.lab_setting import LabgridPlace, without_labgrid
from harness.results.infra import describe_error, infrastructure_error
from harness.runner import CaseRunner, RunnerError, open_runner
from harness.runtime.choice import Runtime
from harness.session.agent_session import Session
from harness.transport.base import TransportError

if TYPE_CHECKING:
    from harness.lab.reservation import LabgridReservation
    from harness.results.artifacts import CrashArtifacts

# Recorded with every result: HELLO facts; real_backends: the registered backends that
# are not probes (e.g. XnnpackBackend), comma-separated; deployment: how the harness
# started the agent (native or glibc-bundle); from_source, lacks: a runtime built from a
# source tree, its parts and what its API lacks (harness/runtime/source_tree.py).
FACT_KEYS = ("abi", "runtime", "agent_version", "load_paths", "real_backends", "deployment",
             "from_source", "lacks")  # fmt: skip

AfterFailure = Callable[[BaseException, int], None]  # (error, try number from 1)
Collect = Callable[[Path], list[Path]]  # copies a device's files into a folder, returns them


class DeviceSlot:
    """One device with one runtime (the device's own when ``runtime`` is None) in this
    process's share of the run."""

    def __init__(
        self,
        profile: DeviceProfile,
        policy: FarmPolicy,
        results_dir: Path | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self.runtime = runtime
        if runtime is not None:
            profile = dataclasses.replace(
                profile, agent=dataclasses.replace(profile.agent, runtime=runtime)
            )
        self.profile = profile
        self.results_dir = results_dir  # where lab holdings are recorded
        self.policy = policy
        self.health = DeviceHealth(profile.name, policy.quarantine_after)
        self.device: Device | None = None
        self.runner: CaseRunner | None = None
        self.facts: dict[str, str] = {}
        self._place = LabgridPlace.of(profile)
        self.lab_facts: dict[str, str] = {}  # place, exporter, holder: held through labgrid
        self._reservation: LabgridReservation | None = None
        self._held = contextlib.ExitStack()
        self._sessions: list[Session] = []
        self._artifacts: CrashArtifacts | None = None  # the current test's
        self.restarts = Restarts(policy)
        self._avoid: dict[str, str] = {}  # a pool's places this run took out, and why
        self._prefer: str | None = None  # the place to hold again (after it was lost)

    @property
    def name(self) -> str:
        return self.profile.name

    # ---- bring-up and health ---------------------------------------------------------

    def open(self) -> Device:
        """The device, held and checked; brought up on first use.

        An infrastructure error while bringing it up or in its first HELLO
        quarantines it (and is raised for the test that asked); a pool's board takes
        the pool's next board instead (:meth:`_move_on`).
        """
        self.health.ensure_usable()
        if self.device is None:
            self._bring_up()
        assert self.device is not None
        return self.device

    def _bring_up(self) -> None:
        """Hold a place (if any), open the device, check it: the runner goes on there."""
        held = False  # a device held elsewhere (DeviceBusy) is not started again
        try:
            profile, board_reset = self._hold()
            held = True
            device, runner = open_runner(
                profile,
                board_reset=board_reset,
                time_limit=self.policy.deadline,
                on_session=self._keep_session,
            )
            self._held.callback(device.close)
            self.device = device
            if self.runner is None:
                self.runner = runner
            else:  # the tests' runner goes on on the new board
                self.runner.take_over(runner)
            self._held.callback(self.runner.close)
        except BaseException as exc:
            reason = f"bring-up failed: {self._described(exc)}"
            if infrastructure_error(exc) is not None:
                if self._move_on(exc, reason) or (held and self._bring_up_again(exc, reason)):
                    return
                self.health.quarantine(f"{reason}{self.restarts.after()}")
            self.close()
            raise
        self._check("the health check before its first test")

    def _bring_up_again(self, error: BaseException, reason: str) -> bool:
        """An emulated device whose bring-up failed (``reason``: its emulator did not
        boot, log in, answer SSH) is brought up anew, its emulator started again, within
        the run's ``emulator_restarts``; False when it is no emulated device, the error
        would recur (a program missing on this machine), or restarts or time are used up."""
        if (
            self.profile.emulator is None
            or isinstance(error, MissingHostTool)
            or not self.restarts.take(reason)
        ):
            return False
        self._let_go()  # the lock: held again by the next bring-up
        self._bring_up()
        return True

    @property
    def recovers(self) -> bool:
        """True for a lab profile whose board is power-cycled when it stops answering."""
        return self._place is not None and self._place.recover == "power"

    @property
    def pool(self) -> bool:
        """True for a lab profile that asks for any place with some tags."""
        return self._place is not None and self._place.place is None

    def _move_on(self, error: BaseException, reason: str) -> bool:
        """A pool's held board failed (``reason``): take it out (lab-wide with
        ``quarantine: lab``), hand it back and go on on another board of the pool; False
        when this is no pool's board or the run's time is up."""
        reservation = self._reservation
        if (
            not self.pool
            or reservation is None
            or reservation.held is None
            or self.policy.deadline.remaining() == 0.0
        ):
            return False
        place = reservation.held.name
        lab_wide = self._quarantine_place(error, reason)
        self._avoid[place] = f"{reason}{lab_wide}"
        self._let_go()
        self._bring_up()
        return True

    def regain(self, lost: BaseException) -> None:
        """The held place was lost (the coordinator restarted and forgot it, or someone
        took it): hold one again, the same if it is free, else another of the pool; the
        device quarantined for the run when none comes within the lock timeout."""
        held = self._reservation.held if self._reservation is not None else None
        self._let_go()
        self._prefer = held.name if held is not None else None
        try:
            self._bring_up()
        except BaseException as exc:
            if infrastructure_error(exc) is not None:
                self.health.quarantine(f"{describe_error(lost)}; then {describe_error(exc)}")
            raise
        finally:
            self._prefer = None

    def _hold_again(self) -> bool:
        """Whether the held place is to be held again rather than left: its resources
        changed since it was acquired (its exporter restarted, as a lab's service manager
        does: waited for within the lock timeout), or it was lost (a coordinator restart)."""
        reservation = self._reservation
        if reservation is None or reservation.held is None:
            return False
        from harness.lab.reservation import PlaceLost  # asyncio: labs only

        timeout = self.policy.deadline.bound(self.policy.lock_timeout)
        try:
            return reservation.resources_moved(timeout)
        except PlaceLost:
            return True
        except TransportError:  # the coordinator is gone: the device is left
            return False

    def _check_held(self) -> None:
        """A lab place lost since the last test (a coordinator restart forgets every
        acquisition) is held again before the test; a coordinator that did not come back
        in time quarantines the device for the run, naming it."""
        reservation = self._reservation
        if reservation is None or reservation.held is None:
            return
        from harness.lab.client_session import CoordinatorLost
        from harness.lab.reservation import PlaceLost  # asyncio: labs only

        try:
            reservation.check_held()
        except PlaceLost as exc:
            self.regain(exc)
        except CoordinatorLost as exc:
            self.health.quarantine(describe_error(exc))
            self.close()
            raise

    def _board(self) -> str:
        """`` (labgrid place NAME)`` while a place is held, for messages."""
        reservation = self._reservation
        held = reservation.held if reservation is not None else None
        return f" (labgrid place {held.name})" if held is not None else ""

    def _let_go(self) -> None:
        """Stop the agent, close the device, hand its place back; the runner stays."""
        try:
            self._held.close()
        finally:
            self.device = None
            self._reservation = None

    @property
    def emulated(self) -> bool:
        """True when the harness started the device (its emulator is ours to restart)."""
        return self.device is not None and self.device.emulator is not None

    def check_if_due(self) -> None:
        """After consecutive infrastructure errors, restart the agent and check it again."""
        if not self.health.needs_check or self.runner is None:
            return
        self.runner.restart()
        self._check(
            f"the health check after {self.health.consecutive_infra_errors} consecutive "
            "infrastructure errors"
        )

    def _check(self, which: str) -> None:
        assert self.runner is not None
        try:
            hello = self.runner.hello
        except Exception as exc:  # the session, the runner, or the harness's own disk
            if not isinstance(exc, TransportError | RunnerError) and not infrastructure_error(exc):
                raise
            if isinstance(exc, TransportError | RunnerError) and self._restart_board(which, exc):
                return
            if self._hold_again():  # its exporter restarted, or the place was lost
                self.regain(exc)
                return
            reason = f"{which} failed: {describe_error(exc)}"
            if self._move_on(exc, reason):
                return
            lab_wide = self._quarantine_place(exc, reason)
            console = self.device.copy_console_log if self.device is not None else None
            agent = isinstance(exc, TransportError | RunnerError)  # no HELLO: the agent's step
            note = " (its agent did not answer HELLO)" if agent else ""
            described = self._described(exc, console, note)
            self.health.quarantine(f"{which} failed: {described}{lab_wide}")
            self.close()
            raise DeviceQuarantined(
                f"device {self.name!r}{self._board()} failed {which} and is quarantined for "
                f"the rest of this run: {described}{lab_wide}"
            ) from exc
        facts = {key: str(hello.fact(key)) for key in FACT_KEYS if hello.fact(key) is not None}
        check_announced_runtime(self.name, self.runtime, facts.get("runtime", ""))
        real = [entry.name for entry in hello.entries if not entry.is_probe]
        if real:
            facts["real_backends"] = ",".join(real)
        if self.device is not None:
            facts["deployment"] = self.device.deployment().mode.value
        self.facts = {**facts, **self.lab_facts}
        self.health.check_passed()

    def _restart_board(self, which: str, error: BaseException) -> bool:
        """Bring a device that failed ``which`` back and check it: its emulator started
        again, or its lab place power-cycled (``recover: power``) and the board waited
        for. One that does not come back is brought back again, then left like any board
        that failed (:meth:`_move_on`) or quarantined. False when it is neither, its
        restarts (``emulator_restarts``) are used up, or the run's time is."""
        found = board_restart(self.device, self._reservation if self.recovers else None)
        if found is None:
            return False
        label, restart = found
        why = f"{which} failed: {self._described(error)}"
        if not self.restarts.take(why if label == EMULATOR_RESTART else f"{label}: {why}"):
            return False
        label = f"{label} {len(self.restarts.made)}"
        self.restart()  # the agent ran on the board that died
        try:
            restart()
        except BaseException as exc:
            if infrastructure_error(exc) is None:
                raise
            if self._restart_board(label, exc):  # its boot cut too
                return True
            described = self._described(exc)
            reason = f"{label} failed: {described}"
            if self._move_on(exc, reason):
                return True
            board = self._board()
            lab_wide = self._quarantine_place(exc, reason)
            self.health.quarantine(f"{reason}{lab_wide}")
            self.close()
            raise DeviceQuarantined(
                f"device {self.name!r}{board} failed {which}, and its {label} failed: "
                f"{described}; it is quarantined for the rest of this run{lab_wide}"
            ) from exc
        self._check(f"the health check after {label}")
        return True

    def _quarantine_place(self, error: BaseException, reason: str) -> str:
        """The held place out of service lab-wide, if the profile asks so and the run has
        time left (:func:`~harness.lab.run_place.quarantine_lab_wide`)."""
        reservation = self._reservation
        if reservation is None or self.policy.deadline.remaining() == 0.0:
            return ""  # a run out of time says nothing of the device
        from harness.lab.run_place import quarantine_lab_wide  # the [lab] extra: labs only

        return quarantine_lab_wide(reservation, self.name, error, reason)

    def _hold(self) -> tuple[DeviceProfile, Callable[[], None] | None]:
        """Hold the device: its labgrid place (if any), then this host's lock on it.

        Returns the profile the device is opened with (a lab profile gets the acquired
        place's address) and how to reset the board through the lab (or None).
        """
        profile, key, board_reset = self.profile, device_key(self.profile), None
        if self._place is not None:
            from harness.lab.own_place import reservation_for  # the [lab] extra: labs only
            from harness.lab.resources import LabResourceError, with_lab_address
            from harness.lab.run_place import hand_back

            # the user's own place, if held (and not taken out), else the lab's
            reservation = reservation_for(self._place, avoid=self._avoid, prefer=self._prefer)
            held = reservation.acquire(self.policy.deadline.bound(self.policy.lock_timeout))
            self._held.callback(hand_back, reservation, self.name, self.results_dir)
            self._reservation = reservation
            self.lab_facts = {
                "place": held.name,
                "exporter": ",".join(held.exporters),
                "holder": reservation.lab.identity.owner,
                "coordinator": reservation.lab.coordinator,
                "reservation": held.reservation,
                "acquired_at": f"{held.acquired_at:.3f}",
            }
            key = f"labgrid:{self._place.coordinator or '$LG_COORDINATOR'}/{held.name}"
            profile = with_lab_address(without_labgrid(profile), held.resources, held.name)
            for field in ("reset", "recover"):
                if getattr(self._place, field) == "power" and held.resources.power_port is None:
                    raise LabResourceError(
                        f"{self.profile.where(f'transport.labgrid.{field}')}: power, but "
                        f"labgrid place {held.name!r} has no NetworkPowerPort"
                    )
            if self._place.reset == "power":
                board_reset = reservation.power_cycle
        lock = DeviceLock(self.profile.name, self.policy.lock_dir, key)
        lock.acquire(self.policy.deadline.bound(self.policy.lock_timeout))
        self._held.callback(lock.release)
        return profile, board_reset

    def close(self) -> None:
        """Stop the agent, release the device, its labgrid place and its lock."""
        try:
            self._held.close()
        finally:
            self.device = None
            self.runner = None

    # ---- the agent -------------------------------------------------------------------

    def _keep_session(self, session: Session) -> None:
        self._sessions.append(session)

    def begin_test(self, artifacts: CrashArtifacts | None = None) -> None:
        """Forget agents that ended before this test (their stderr is not this test's);
        what shows why the device fails during it is kept in ``artifacts``."""
        self._sessions = self._sessions[-1:]
        self._artifacts = artifacts

    def _described(
        self, error: BaseException, collect: Collect | None = None, note: str = ""
    ) -> str:
        """:func:`describe_error` of ``error`` and ``note``, what shows why kept first as the
        test's artifacts and named (:meth:`CrashArtifacts.keep_and_name`): the device, and
        its emulator's directory, are closed after."""
        if self._artifacts is None:
            return describe_error(error, f"{error}{note}")
        text, kept = self._artifacts.keep_and_name(error, collect)
        return f"{describe_error(error, f'{text}{note}', limit=600)}{kept}"

    def stderr_tails(self) -> list[tuple[str, str]]:
        """(title, last stderr lines) of each agent that ran during the current test."""
        tails = []
        for number, session in enumerate(self._sessions, 1):
            tail = session.stderr_tail()
            if tail:
                which = (
                    f", agent {number} of {len(self._sessions)}" if len(self._sessions) > 1 else ""
                )
                tails.append((f"agent stderr on {self.name}{which}", tail))
        return tails

    def restart(self) -> None:
        """Stop the agent; the next request starts a fresh one."""
        if self.runner is not None:
            self.runner.restart()

    def reset(self, failed_tries: list[BaseException], after_failure: AfterFailure) -> None:
        """Reset the agent before a test, restarting and retrying on infrastructure errors.

        An agent whose session broke in an earlier test is restarted first: within a
        test it refuses every request
        (:class:`~harness.session.agent_session.SessionBroken`), even a reset, until the
        test's retry restarts it.
        """
        assert self.runner is not None
        self._check_held()
        if self.runner.broken:
            self.runner.restart()
        try:
            self.runner.reset()
        except Exception as exc:
            if infrastructure_error(exc) is None:
                raise
            self.retry(self.runner.reset, exc, failed_tries, after_failure)

    def retry(
        self,
        attempt: Callable[[], object],
        error: BaseException,
        failed_tries: list[BaseException],
        after_failure: AfterFailure,
    ) -> None:
        """After ``error`` (an infrastructure error), restart the agent and try again.

        At most ``infra_retries`` more tries per test (``failed_tries`` is the test's:
        a retry its setup used is not there for its call), none once the device is
        quarantined or the run's time is up; so a device that stops answering ends a
        test within about ``infra_retries + 1`` case timeouts. Each failed try is
        appended to ``failed_tries`` and handed to ``after_failure(error, try
        number)`` before the agent restarts (e.g. to keep its core file); when every
        try failed, the last error is raised.
        """
        retries_used = len(failed_tries)  # every earlier failed try of this test was retried
        failed_tries.append(error)
        after_failure(error, len(failed_tries))
        for _ in range(max(0, self.policy.infra_retries - retries_used)):
            if self.health.quarantined or self.policy.deadline.remaining() == 0.0:
                break
            self.restart()
            if self.emulated or self.pool or self.recovers:  # a dead emulator is restarted, a
                self._check("the health check before a retry")  # board power-cycled, or left
            try:
                attempt()
                return
            except Exception as exc:
                if infrastructure_error(exc) is None:
                    raise
                error = exc
                failed_tries.append(exc)
                after_failure(exc, len(failed_tries))
        raise error

    def collect_artifacts(self, dest: Path) -> list[Path]:
        """What the device's crashed agent left (:meth:`Device.collect_artifacts`), if it is up."""
        return self.device.collect_artifacts(dest) if self.device is not None else []
