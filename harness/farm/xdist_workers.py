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


def quiet_when_orphaned(config: pytest.Config) -> None:
    """In an xdist worker: once the controller is gone, drop what xdist would send it.

    The worker then tears its devices down (:func:`~harness.lifecycle.signals.
    sigterm_when_orphaned`), and xdist's own teardown sends the controller its
    results, which failed (``OSError: cannot send (already closed?)``) and made pluggy
    print a ``PluggyTeardownRaisedWarning`` per worker. A send that fails while the
    controller still runs is raised as before.
    """
    controller = os.getppid()
    for plugin in config.pluginmanager.get_plugins():
        send = getattr(plugin, "sendevent", None)
        if type(plugin).__name__ != "WorkerInteractor" or send is None:
            continue

        def sendevent(name: str, _send: Any = send, **kwargs: object) -> None:
            try:
                _send(name, **kwargs)
            except OSError:
                if os.getppid() == controller:
                    raise

        plugin.sendevent = sendevent


def interrupted_by_sigterm(workers: XdistWorkers) -> None:
    """End the run as on Ctrl-C, the workers told first."""
    workers.terminate()
    pytest.exit(
        "SIGTERM: the run stops; its devices are brought down",
        returncode=pytest.ExitCode.INTERRUPTED,
    )
