"""A device's health during a run: consecutive infrastructure errors and quarantine.

A device is health-checked (a fresh agent and a HELLO) before its first test and
again after ``quarantine_after`` tests in a row ended in infrastructure errors.
A device that fails the check is quarantined for the rest of the run: its
remaining tests end at once, naming the reason, and the other devices go on.
"""

from __future__ import annotations

from harness.transport.base import DeviceUnavailable


class DeviceQuarantined(DeviceUnavailable):
    """The device failed its health check earlier in this run; the test was not started."""


class DeviceHealth:
    """The health bookkeeping of one device (state, updated as its tests end)."""

    def __init__(self, device: str, quarantine_after: int) -> None:
        if quarantine_after < 1:
            raise ValueError(f"quarantine_after must be >= 1; got {quarantine_after}")
        self.device = device
        self.quarantine_after = quarantine_after
        self.consecutive_infra_errors = 0
        self.quarantine_reason: str | None = None

    @property
    def quarantined(self) -> bool:
        return self.quarantine_reason is not None

    @property
    def needs_check(self) -> bool:
        """True once ``quarantine_after`` tests in a row ended in infrastructure errors."""
        return not self.quarantined and self.consecutive_infra_errors >= self.quarantine_after

    def test_ended(self, infrastructure_error: bool) -> None:
        """Count a finished test: an infrastructure error, or a test that reached a verdict."""
        if infrastructure_error:
            self.consecutive_infra_errors += 1
        else:
            self.consecutive_infra_errors = 0

    def check_passed(self) -> None:
        self.consecutive_infra_errors = 0

    def quarantine(self, reason: str) -> None:
        """Take the device out of the run (the first reason stays)."""
        if self.quarantine_reason is None:
            self.quarantine_reason = reason

    def ensure_usable(self) -> None:
        """Raise :class:`DeviceQuarantined` if the device is quarantined."""
        if self.quarantine_reason is not None:
            raise DeviceQuarantined(
                f"device {self.device!r} is quarantined for the rest of this run: "
                f"{self.quarantine_reason}"
            )
