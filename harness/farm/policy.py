"""How a run treats its devices: waiting, retrying, quarantining, ending in time."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from harness.farm.deadline import RunDeadline
from harness.farm.lock import default_lock_dir


@dataclass(frozen=True)
class FarmPolicy:
    """The run's rules for devices, from the command line (see docs/device-farm.md)."""

    infra_retries: int = 1  # extra tries of a test after an infrastructure error
    quarantine_after: int = 2  # consecutive infrastructure errors before a health check
    emulator_restarts: int = 2  # per emulated device and run, when its health check fails
    lock_timeout: float = 600.0  # seconds to wait for a device another process holds
    lock_dir: Path = field(default_factory=default_lock_dir)
    deadline: RunDeadline = field(default_factory=RunDeadline)

    def __post_init__(self) -> None:
        if self.infra_retries < 0:
            raise ValueError(f"--infra-retries must be >= 0; got {self.infra_retries}")
        if self.quarantine_after < 1:
            raise ValueError(f"--quarantine-after must be >= 1; got {self.quarantine_after}")
        if self.emulator_restarts < 0:
            raise ValueError(f"--emulator-restarts must be >= 0; got {self.emulator_restarts}")
        if not 0 <= self.lock_timeout < math.inf:  # nan and inf would wait forever
            raise ValueError(f"--lock-timeout must be >= 0 seconds; got {self.lock_timeout}")
        seconds = self.deadline.seconds
        if seconds is not None and not 0 < seconds < math.inf:  # nan, 0, -5: every test infra
            raise ValueError(f"--run-timeout must be > 0 seconds; got {seconds}")
