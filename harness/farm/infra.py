"""What counts as an infrastructure error: device trouble, not a verdict on the runtime.

:class:`~harness.transport.base.TransportError` and its subclasses (a lost link,
a timeout, a device that cannot be reached, busy or quarantined) and
:class:`InfrastructureError` (trouble of the farm itself, e.g. the run's time is
up). They are reported as their own outcome, retried and counted towards
quarantine, never as test failures.
"""

from __future__ import annotations

from harness.transport.base import TransportError


class InfrastructureError(Exception):
    """Trouble of the test farm around the device, not of the code under test."""


def infrastructure_error(exc: BaseException) -> BaseException | None:
    """``exc`` if it is an infrastructure error, else None.

    An exception group (e.g. from hypothesis) counts when every exception in it
    does; the first one is returned.
    """
    if isinstance(exc, (TransportError, InfrastructureError)):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found = [infrastructure_error(inner) for inner in exc.exceptions]
        if found and all(found):
            return found[0]
    return None


def one_line(text: str, limit: int = 300) -> str:
    """``text`` (e.g. an error message with a stderr tail) on one line, at most ``limit`` chars."""
    joined = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."
