"""The controller's xdist workers, and what a SIGTERM to the controller does to them."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

import pytest


class XdistWorkers:
    """The controller's xdist workers, so that a SIGTERM to the controller reaches them.

    A controller SIGTERMed alone (`kill PID`, CI cancellation) would otherwise wait
    xdist's 10 s for its workers before killing them.
    """

    def __init__(self) -> None:
        self.pids: set[int] = set()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        pid = gateway.remote_exec("import os; channel.send(os.getpid())").receive(timeout=30)
        if isinstance(pid, int):
            self.pids.add(pid)

    def terminate(self) -> None:
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def interrupted_by_sigterm(workers: XdistWorkers) -> None:
    """End the run as on Ctrl-C, the workers told first."""
    workers.terminate()
    pytest.exit(
        "SIGTERM: the run stops; its devices are brought down",
        returncode=pytest.ExitCode.INTERRUPTED,
    )
