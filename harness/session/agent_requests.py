"""The requests a case runner sends its device's agent, one named operation each.

:class:`AgentRequests` starts the agent on first use (HELLO, the registry it starts
with), sends HELLO, REGISTER, LOAD, EXECUTE, SET, GET and RESET, and is the one place
that checks the time limit before a request and marks the session broken when device
trouble ends one: every later request is :class:`SessionBroken` at once, until
:meth:`AgentRequests.close` (the next request then starts a fresh agent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.data.messages import Action, Outcome, Report, Request
from harness.data.options import OptionsMap
from harness.data.runtime_error import RuntimeErrorCode
from harness.errors import UsageError
from harness.session.agent_session import Session, SessionBroken, TimeLimit
from harness.session.announced import Announced
from harness.transport.base import TransportError

__all__ = ["AgentRequests", "LoadPathNotServed", "RunnerError"]


class RunnerError(UsageError):
    """A case asked for something the device cannot do; the message says what to change."""


class LoadPathNotServed(RunnerError):
    """A LOAD asks for a path the device's runtime lacks (a runtime from a source tree
    whose API has no load-time map, or no ``Module::load(map)``: HELLO ``lacks``). The
    pytest plugin reports the test skipped with this message, never failed."""


class AgentRequests(Announced):
    """Named requests to the agent ``start_session`` starts (a new process, or a rebooted
    MCU), each within ``time_limit`` (e.g. the run's deadline)."""

    def __init__(
        self, start_session: Callable[[], Session], time_limit: TimeLimit | None = None
    ) -> None:
        self.start_session = start_session
        self._time_limit = time_limit
        self._session: Session | None = None
        self._hello: Report | None = None
        self._registered: list[str] = []
        self._broken: TransportError | None = None  # what broke the running agent's session

    @property
    def session(self) -> Session:
        """The running agent's session, started on first use.

        :class:`SessionBroken` once a request on it failed with device trouble.
        """
        if self._broken is not None:
            raise SessionBroken(
                f"not sent: the agent's session failed earlier ({type(self._broken).__name__}); "
                "nothing more is sent to this agent until it is restarted"
            ) from self._broken
        if self._session is None:
            try:
                self._session = self.start_session()
            except TransportError as exc:
                self._broken = exc
                raise
            self._hello = self._exchange(lambda session: session.request(Request(Action.HELLO)))
            if self._hello.outcome is not Outcome.OK:
                raise RunnerError(f"the agent refused HELLO: {self._hello.message}")
            self._registered = [entry.name for entry in self._hello.entries]
        return self._session

    @property
    def started(self) -> bool:
        """Whether an agent runs (started and not closed since)."""
        return self._session is not None

    @property
    def broken(self) -> bool:
        """True once a request failed with device trouble, until the agent is restarted."""
        return self._broken is not None

    @property
    def hello(self) -> Report:
        """The agent's HELLO report: facts and the backends registered at start."""
        _ = self.session
        assert self._hello is not None
        return self._hello

    @property
    def registered(self) -> tuple[str, ...]:
        """Backend names the device's registry holds now."""
        _ = self.session
        return tuple(self._registered)

    def close(self) -> None:
        """Stop the agent; the next request starts a fresh one (empty registry)."""
        self._broken = None
        if self._session is not None:
            session, self._session = self._session, None
            self._hello = None
            self._registered = []
            session.close()

    def register(self, names: Sequence[str]) -> Report:
        """REGISTER ``names`` as they are; the report unchecked, the names registered noted."""
        report = self._exchange(lambda session: session.request(Request.register(tuple(names))))
        for entry in report.entries:
            if entry.status == RuntimeErrorCode.Ok and entry.name not in self._registered:
                self._registered.append(entry.name)
        return report

    def execute(self) -> Report:
        """EXECUTE the loaded program (every loaded model, in model order) once more."""
        return self._exchange(lambda session: session.request(Request(Action.EXECUTE)))

    def set(self, options: OptionsMap) -> Report:
        """SET ``options`` (``set_option`` for each backend)."""
        return self._exchange(lambda session: session.request(Request(Action.SET, options)))

    def get(self, requested: OptionsMap) -> Report:
        """GET ``requested`` (``get_option`` for each backend)."""
        return self._exchange(lambda session: session.request(Request(Action.GET, requested)))

    def reset(self) -> Report:
        """RESET: the agent forgets the loaded program and the probes' records."""
        return self._exchange(lambda session: session.request(Request(Action.RESET)))

    def send(self, request: Request) -> Report:
        """Any request as it is (a LOAD among them), if the agent serves its load paths."""
        return self._exchange(lambda session: session.request(self._served(request)))

    def send_raw(self, frame: bytes, seq: int) -> Report:
        """Raw bytes, e.g. a deliberately malformed frame, and the report read back."""
        return self._exchange(lambda session: session.send_raw(frame, seq))

    def _exchange(self, send: Callable[[Session], Report]) -> Report:
        """``send(session)`` within the time limit; device trouble marks the session broken."""
        if self._time_limit is not None:
            self._time_limit.check()
        session = self.session
        try:
            return send(session)
        except TransportError as exc:
            self._broken = exc
            raise

    def _served(self, request: Request) -> Request:
        """``request``, unless it is a LOAD on a path the runtime lacks (HELLO ``lacks``:
        a runtime from a source tree): then :class:`LoadPathNotServed`."""
        lacks = self.hello.fact("lacks")
        if request.action is not Action.LOAD or not isinstance(lacks, str) or not lacks:
            return request
        for path in (request.path, *(model.path for model in request.models)):
            if path not in self.load_paths:
                raise LoadPathNotServed(
                    f"the device's agent does not serve load path {path.label!r}: the "
                    f"runtime lacks {lacks}"
                )
        return request
