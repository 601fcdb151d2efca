"""The whole-run timeout (``--run-timeout``): after it, remaining tests end at once."""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness.errors import InfrastructureError


class RunTimeExpired(InfrastructureError):
    """The run's time (``--run-timeout``) is up: the test was stopped or not started."""


@dataclass(frozen=True)
class RunDeadline:
    """When the run must end, as wall-clock seconds since the epoch (None: no limit).

    Wall-clock time, so that xdist workers share the controller's deadline. Agent
    sessions take it as their :class:`~harness.session.agent_session.TimeLimit`, so that a
    running test ends when the run's time is up, not a case timeout later.
    """

    expires_at: float | None = None
    seconds: float | None = None

    @classmethod
    def starting_now(cls, seconds: float | None) -> RunDeadline:
        if seconds is None:
            return cls()
        return cls(time.time() + seconds, seconds)

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None without a limit."""
        if self.expires_at is None:
            return None
        return max(0.0, self.expires_at - time.time())

    def bound(self, seconds: float) -> float:
        """``seconds``, or less if the run ends sooner."""
        remaining = self.remaining()
        return seconds if remaining is None else min(seconds, remaining)

    def check(self) -> None:
        """Raise :class:`RunTimeExpired` if the run's time is up."""
        if self.remaining() == 0.0:
            raise RunTimeExpired(
                f"the run's time is up (--run-timeout {self.seconds:g} s): the test was stopped "
                "or not started; give the run more time or select fewer tests or devices"
            )
