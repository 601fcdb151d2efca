"""A device's restarts in one run: its emulator started again, or its lab board
power-cycled (``recover: power``), counted against the run's ``emulator_restarts`` and
reported with the test that ends (:mod:`harness.farm.slot`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING

from harness.devices.base import Device
from harness.errors import InfrastructureError
from harness.farm.policy import FarmPolicy

if TYPE_CHECKING:
    from harness.lab.reservation import LabgridReservation

EMULATOR_RESTART = "emulator restart"  # how a board is brought back, in messages
POWER_CYCLE = "power cycle"  # (its lab place's power port; the profile's recover: power)


class Restarts:
    """The restarts a run made of one device, each line saying why
    (``restart 1 of 2: the health check before a retry failed: ...``)."""

    def __init__(self, policy: FarmPolicy) -> None:
        self._policy = policy
        self.made: list[str] = []
        self._reported = 0

    def take(self, why: str) -> bool:
        """Count a restart for ``why``, if the run's ``emulator_restarts`` and time allow one."""
        allowed = self._policy.emulator_restarts
        if len(self.made) >= allowed or self._policy.deadline.remaining() == 0.0:
            return False
        self.made.append(f"restart {len(self.made) + 1} of {allowed}: {why}")
        return True

    def after(self) -> str:
        """`` (after N emulator restarts)`` once restarts were made, for a quarantine reason."""
        made = len(self.made)
        return f" (after {made} emulator restart{'s' * (made != 1)})" if made else ""

    def new(self) -> list[str]:
        """The restarts since this was last called (for the test that ends)."""
        new = self.made[self._reported :]
        self._reported = len(self.made)
        return new


def board_restart(
    device: Device | None, lab_place: LabgridReservation | None
) -> tuple[str, Callable[[], None]] | None:
    """How ``device``'s board is brought back, and its name in messages: its emulator
    restarted, or the power of its held lab place (``lab_place``, when the profile asks
    ``recover: power``) cycled and the board waited for while it boots, its console read
    meanwhile when the place has one (a board that does not come back carries it as
    ``kept``: the test's artifact); None: neither."""
    if device is None:
        return None
    if device.emulator is not None:
        return EMULATOR_RESTART, device.restart_emulator
    if lab_place is None or lab_place.held is None:
        return None
    console = lab_place.held.resources.serial

    def cycle_and_wait() -> None:
        from harness.lab.console import ConsoleCapture  # the [lab] extra: labs only

        with ConsoleCapture(console) if console is not None else nullcontext() as capture:
            lab_place.power_cycle()
            try:
                device.power_cycled()
            except InfrastructureError as exc:
                if capture is not None:
                    exc.kept = (*exc.kept, (capture.name, capture.text))
                raise

    return POWER_CYCLE, cycle_and_wait
