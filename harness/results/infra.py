"""What counts as an infrastructure error: device trouble, not a verdict on the runtime.

The infra branch of the harness's errors, :class:`harness.errors.InfrastructureError`:
:class:`~harness.transport.base.TransportError` and its subclasses (a lost session, a
timeout, a device that cannot be reached, busy or quarantined), an emulator that did
not start, and trouble of the farm itself (e.g. the run's time is up). They are
reported as their own outcome, retried and counted towards quarantine, never as test
failures.

Hypothesis wraps what a test raised: in an exception group when it found several
distinct failures (``FlakyFailure`` is one too), or in one of its own errors
whose cause or context is the test's exception. Both are looked through.
"""

from __future__ import annotations

from collections.abc import Iterator

from harness.errors import InfrastructureError
from harness.session.agent_session import SessionBroken


def infrastructure_error(exc: BaseException) -> BaseException | None:
    """The infrastructure error ``exc`` stands for, or None if it is a test's own failure.

    An exception group counts when every exception in it does (the first one is
    returned); a Hypothesis error counts when its cause or context does. A
    :class:`~harness.session.agent_session.SessionBroken` stands for the error that broke
    the session.
    """
    if isinstance(exc, SessionBroken) and exc.__cause__ is not None:
        return infrastructure_error(exc.__cause__) or exc
    if isinstance(exc, InfrastructureError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found = [infrastructure_error(inner) for inner in exc.exceptions]
        if found and all(found):
            return found[0]
        return None
    if _is_hypothesis_error(exc):
        for inner in (exc.__cause__, exc.__context__):
            if inner is not None and (found_inner := infrastructure_error(inner)) is not None:
                return found_inner
    return None


def _is_hypothesis_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".", 1)[0] == "hypothesis"


def every_exception(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception inside it: group members, causes and contexts."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def one_line(text: str, limit: int = 300) -> str:
    """``text`` (e.g. an error message with a stderr tail) on one line, at most ``limit`` chars."""
    joined = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def describe_error(exc: BaseException, message: str | None = None, limit: int = 300) -> str:
    """``TransportLost: host: ...``: the type and the message (``message`` instead of its
    own) on one line, shortened to ``limit`` characters."""
    return f"{type(exc).__name__}: {one_line(str(exc) if message is None else message, limit)}"
