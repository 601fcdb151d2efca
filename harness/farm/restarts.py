"""A device's restarts in one run: its emulator started again, or its lab board
power-cycled (``recover: power``), counted against the run's ``emulator_restarts`` and
reported with the test that ends (:mod:`harness.farm.slot`)."""

from __future__ import annotations

from collections.abc import Callable

from harness.devices.base import Device
from harness.farm.policy import FarmPolicy

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
    device: Device | None, power_cycle: Callable[[], None] | None
) -> tuple[str, Callable[[], None]] | None:
    """How ``device``'s board is brought back, and its name in messages: its emulator
    restarted, or its lab place's power cycled (``power_cycle``, when the profile asks
    ``recover: power``) and the board waited for while it boots; None: neither."""
    if device is None:
        return None
    if device.emulator is not None:
        return EMULATOR_RESTART, device.restart_emulator
    if power_cycle is None:
        return None

    def cycle_and_wait() -> None:
        power_cycle()
        device.power_cycled()

    return POWER_CYCLE, cycle_and_wait
