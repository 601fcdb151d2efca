"""The requests a case runner sends its device's agent, one named operation each.

:class:`AgentRequests` starts the agent on first use (HELLO, the registry it starts
with), sends HELLO, REGISTER, LOAD, EXECUTE, SET, GET and RESET, and is the one place
that checks the time limit before a request and marks the session broken when device
trouble ends one: every later request is :class:`LinkBroken` at once, until
:meth:`AgentRequests.close` (the next request then starts a fresh agent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.data.messages import Action, Outcome, Report, Request
from harness.data.options import OptionsMap
from harness.data.runtime_error import RuntimeErrorCode
from harness.errors import UsageError
from harness.session.agent_session import AgentLink, LinkBroken, TimeLimit
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
    """Named requests to the agent ``start_link`` starts (a new process, or a rebooted
    MCU), each within ``time_limit`` (e.g. the run's deadline)."""

    def __init__(
        self, start_link: Callable[[], AgentLink], time_limit: TimeLimit | None = None
    ) -> None:
        self.start_link = start_link
        self._time_limit = time_limit
        self._link: AgentLink | None = None
        self._hello: Report | None = None
        self._registered: list[str] = []
        self._broken: TransportError | None = None  # what broke the running agent's link

    @property
    def link(self) -> AgentLink:
        """The running agent's link, started on first use.

        :class:`LinkBroken` once a request on it failed with device trouble.
        """
        if self._broken is not None:
            raise LinkBroken(
                f"not sent: the agent's link failed earlier ({type(self._broken).__name__}); "
                "nothing more is sent to this agent until it is restarted"
            ) from self._broken
        if self._link is None:
            try:
                self._link = self.start_link()
            except TransportError as exc:
                self._broken = exc
                raise
            self._hello = self._exchange(lambda link: link.request(Request(Action.HELLO)))
            if self._hello.outcome is not Outcome.OK:
                raise RunnerError(f"the agent refused HELLO: {self._hello.message}")
            self._registered = [entry.name for entry in self._hello.entries]
        return self._link

    @property
    def started(self) -> bool:
        """Whether an agent runs (started and not closed since)."""
        return self._link is not None

    @property
    def broken(self) -> bool:
        """True once a request failed with device trouble, until the agent is restarted."""
        return self._broken is not None

    @property
    def hello(self) -> Report:
        """The agent's HELLO report: facts and the backends registered at start."""
        _ = self.link
        assert self._hello is not None
        return self._hello

    @property
    def registered(self) -> tuple[str, ...]:
        """Backend names the device's registry holds now."""
        _ = self.link
        return tuple(self._registered)

    def close(self) -> None:
        """Stop the agent; the next request starts a fresh one (empty registry)."""
        self._broken = None
        if self._link is not None:
            link, self._link = self._link, None
            self._hello = None
            self._registered = []
            link.close()

    def register(self, names: Sequence[str]) -> Report:
        """REGISTER ``names`` as they are; the report unchecked, the names registered noted."""
        report = self._exchange(lambda link: link.request(Request.register(tuple(names))))
        for entry in report.entries:
            if entry.status == RuntimeErrorCode.Ok and entry.name not in self._registered:
                self._registered.append(entry.name)
        return report

    def execute(self) -> Report:
        """EXECUTE the loaded program (every loaded model, in model order) once more."""
        return self._exchange(lambda link: link.request(Request(Action.EXECUTE)))

    def set(self, options: OptionsMap) -> Report:
        """SET ``options`` (``set_option`` for each backend)."""
        return self._exchange(lambda link: link.request(Request(Action.SET, options)))

    def get(self, requested: OptionsMap) -> Report:
        """GET ``requested`` (``get_option`` for each backend)."""
        return self._exchange(lambda link: link.request(Request(Action.GET, requested)))

    def reset(self) -> Report:
        """RESET: the agent forgets the loaded program and the probes' records."""
        return self._exchange(lambda link: link.request(Request(Action.RESET)))

    def send(self, request: Request) -> Report:
        """Any request as it is (a LOAD among them), if the agent serves its load paths."""
        return self._exchange(lambda link: link.request(self._served(request)))

    def send_raw(self, frame: bytes, seq: int) -> Report:
        """Raw bytes, e.g. a deliberately malformed frame, and the report read back."""
        return self._exchange(lambda link: link.send_raw(frame, seq))

    def _exchange(self, send: Callable[[AgentLink], Report]) -> Report:
        """``send(link)`` within the time limit; device trouble marks the link broken."""
        if self._time_limit is not None:
            self._time_limit.check()
        link = self.link
        try:
            return send(link)
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
