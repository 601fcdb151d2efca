"""Option-map cases on one device: probes registered, programs provided, verdicts checked.

:class:`CaseRunner` is what test suites talk to (through the ``et`` fixture). It
owns one agent link, keeps track of which probe backends the device's registry
holds, and turns "send this map" into the right requests and a :class:`Verdict`.

With :mod:`harness.options` and :mod:`harness.check` this module is the interface
suites use (``__all__``; ``tests/unit/test_public_api.py`` keeps ``suites/`` to it):
:class:`ModelLoad` for :meth:`CaseRunner.load_models`, :func:`encode_request` for the
bytes :meth:`CaseRunner.send_raw` corrupts, :func:`xnnpack_program`, the harness's
XNNPACK program as a ``.pte`` file (for :meth:`CaseRunner.check_program`), and
:func:`xnnpack_output`, what it computes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.check import (
    OptionWarning,
    Route,
    Verdict,
    check_get,
    check_load,
    check_set,
    heed_options,
)
from harness.check.several_models import check_models
from harness.codec.mapfile import MapFile, as_map
from harness.codec.wire import encode_request
from harness.data.messages import Action, LoadPath, LoadSpec, Outcome, Report, Request
from harness.data.options import (
    MAX_LOAD_BACKENDS,
    MAX_OPTIONS_PER_BACKEND,
    BackendOptions,
    Option,
    OptionsMap,
)
from harness.data.runtime_error import RuntimeErrorCode
from harness.errors import UsageError
from harness.probes import (
    plan_load,
    probes_to_register,
    refuse_real_probes,
    undeclared_probes,
)
from harness.programs.xnnpack import expected_output as xnnpack_output
from harness.programs.xnnpack import xnnpack_program
from harness.session.agent_session import AgentLink, LinkBroken, TimeLimit
from harness.transport.base import TransportError

if TYPE_CHECKING:
    from harness.check.option_outcomes import OptionOutcome
    from harness.devices.base import Device
    from harness.profiles.device_profile import DeviceProfile
    from harness.program_check import ProgramCheck


class DeviceFiles(Protocol):
    """A device's files, as far as an option's declared effect needs them (a
    :class:`~harness.devices.base.Device` with a file system is one)."""

    def file_exists(self, remote: str) -> bool: ...

    def remove_file(self, remote: str) -> None: ...


__all__ = [
    "STORED_DECOY",
    "CaseRunner",
    "LinkBroken",
    "ModelLoad",
    "RunnerError",
    "encode_request",
    "open_runner",
    "xnnpack_output",
    "xnnpack_program",
]

DEFAULT_REGISTRY_CAPACITY = 16  # kMaxRegisteredBackends
# module_both's default stored map gives each backend this option: the explicit map
# replaces the stored one wholly, so no delegate may ever receive it.
STORED_DECOY = Option("etb.stored_map_must_not_arrive", True)


class RunnerError(UsageError):
    """A case asked for something the device cannot do; the message says what to change."""


class LoadPathNotServed(RunnerError):
    """A LOAD asks for a path the device's runtime lacks (a runtime from a source tree
    whose API has no load-time map, or no ``Module::load(map)``: HELLO ``lacks``). The
    pytest plugin reports the test skipped with this message, never failed."""


class RegistryKept(TransportError):
    """A restarted agent still holds the probes of an earlier session (a board nothing
    could reset) and the case needs room it lacks: device trouble, not the case's."""


@dataclass(frozen=True)
class ModelLoad:
    """One model of :meth:`CaseRunner.load_models`: a probe program loaded through
    ``path`` whose delegates must receive ``options``.

    Fields as :meth:`CaseRunner.load`'s: ``delegates`` default to the map's backend
    ids (the program delegates to them, in that order); on ``module_both``
    ``options`` is the explicit map of ``Module::load_method`` and ``stored`` the
    map of ``Module::load`` (default: one decoy option per backend, which must never
    arrive); other paths take no ``stored``.
    """

    options: OptionsMap
    delegates: tuple[str, ...] | None = None
    path: LoadPath = LoadPath.PROGRAM
    stored: OptionsMap | None = None
    method: str = ""

    @property
    def program_ids(self) -> tuple[str, ...]:
        return tuple(self.options.backend_ids if self.delegates is None else self.delegates)

    def spec(self, program: str) -> LoadSpec:
        """This model as the wire carries it, its program at device path ``program``."""
        if self.stored is not None and self.path is not LoadPath.MODULE_BOTH:
            raise RunnerError(
                f"a stored map goes with path module_both only, not {self.path.label}"
            )
        if self.path is LoadPath.MODULE_BOTH:
            first = (
                self.stored if self.stored is not None else _decoy(self.program_ids, self.options)
            )
            return LoadSpec(program, self.program_ids, first, self.path, self.method, self.options)
        return LoadSpec(program, self.program_ids, self.options, self.path, self.method)


class CaseRunner:
    """Runs cases on one device through an agent link that it starts and restarts.

    ``start_link`` starts a fresh agent (a new process, or a rebooted MCU) and
    returns its link; ``program_for`` returns the device path of a probe program
    whose delegates are the given ids, pushing it first if needed ("" on devices
    without a file system); ``time_limit`` (e.g. the run's deadline) is checked
    before every request; ``push_program`` returns the device path of a program
    file, pushed if needed (with an inputs file beside it, if given), and
    ``forget_program`` removes one a load found damaged (:meth:`check_program`);
    ``device_files`` looks for and removes the files an option's declared effect leaves
    (None: the device has no file system).
    """

    def __init__(
        self,
        start_link: Callable[[], AgentLink],
        program_for: Callable[[tuple[str, ...]], str],
        time_limit: TimeLimit | None = None,
        push_program: Callable[[Path, Path | None], str] | None = None,
        forget_program: Callable[[str], None] | None = None,
        device_files: DeviceFiles | None = None,
    ) -> None:
        self._start_link = start_link
        self._program_for = program_for
        self._push_program = push_program
        self._forget_program = forget_program
        self.device_files = device_files  # where an option's declared file is looked for
        self._time_limit = time_limit  # checked before every request (e.g. the run's deadline)
        self._link: AgentLink | None = None
        self._hello: Report | None = None
        self._registered: list[str] = []
        self._declared: set[str] = set()  # probe names declared in this case (until reset)
        self._dirty = False  # state was set since the last reset: a restart would lose it
        self._broken: TransportError | None = None  # what broke the running agent's link
        self.on_verdict: Callable[[Verdict], None] | None = None  # e.g. the run's summary
        # what each option did in a program check (the report's "what the options did")
        self.on_options: Callable[[tuple[OptionOutcome, ...]], None] | None = None
        # Every map sent is judged (heed_options): options its backends will ignore are
        # warnings, failures with --strict-options; options_judged False: not judged.
        self.strict_options = False
        self.options_judged = True

    # ---- the agent -----------------------------------------------------------------

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
                self._link = self._start_link()
            except TransportError as exc:
                self._broken = exc
                raise
            self._hello = self._exchange(lambda link: link.request(Request(Action.HELLO)))
            if self._hello.outcome is not Outcome.OK:
                raise RunnerError(f"the agent refused HELLO: {self._hello.message}")
            self._registered = [entry.name for entry in self._hello.entries]
        return self._link

    @property
    def broken(self) -> bool:
        """True once a request failed with device trouble, until the agent is restarted."""
        return self._broken is not None

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

    @property
    def real_backends(self) -> tuple[str, ...]:
        """The device's own backends: HELLO's entries without the PROBE flag (probes a
        board kept from an earlier session are probes all the same)."""
        return tuple(entry.name for entry in self.hello.entries if not entry.is_probe)

    @property
    def load_paths(self) -> tuple[LoadPath, ...]:
        """The load paths the agent serves (HELLO ``load_paths``; ``program`` if absent)."""
        announced = self.hello.fact("load_paths")
        if not isinstance(announced, str):
            return (LoadPath.PROGRAM,)
        known = {p.label: p for p in LoadPath}
        return tuple(known[name] for name in announced.split(",") if name in known)

    @property
    def load_flags(self) -> tuple[str, ...]:
        """The LOAD flags the agent honours (HELLO ``load_flags``, e.g. ``keep``)."""
        announced = self.hello.fact("load_flags")
        return tuple(announced.split(",")) if isinstance(announced, str) and announced else ()

    @property
    def recorded(self) -> tuple[str, ...]:
        """The real backends whose calls the agent records (HELLO ``recorded``): their
        entries are checked exactly, like a probe's (docs/agent.md)."""
        announced = self.hello.fact("recorded")
        return tuple(announced.split(",")) if isinstance(announced, str) and announced else ()

    @property
    def max_models(self) -> int:
        """How many models one LOAD may carry (HELLO ``max_models``; 1 if absent)."""
        value = self.hello.fact("max_models")
        return value if isinstance(value, int) and value >= 1 else 1

    @property
    def concurrent(self) -> bool:
        """Whether the device loads the models of a CONCURRENT LOAD on threads of their own
        (HELLO ``concurrent``; absent: whenever it holds several models)."""
        value = self.hello.fact("concurrent")
        return value if isinstance(value, bool) else self.max_models > 1

    @property
    def capacity(self) -> int:
        value = self.hello.fact("registry_capacity")
        return value if isinstance(value, int) else DEFAULT_REGISTRY_CAPACITY

    @property
    def options_per_backend(self) -> int:
        """Options one backend may carry in a request on this device (HELLO
        ``options_per_backend``, announced by devices short of RAM; else the wire's 64)."""
        return self._announced("options_per_backend", MAX_OPTIONS_PER_BACKEND)

    @property
    def backends_per_map(self) -> int:
        """Backends a load-time map may name on this device (HELLO ``backends_per_map``)."""
        return self._announced("backends_per_map", MAX_LOAD_BACKENDS)

    @property
    def options_per_request(self) -> int:
        """Options all backends of one request may carry together (HELLO
        ``options_per_request``; without it, as many as the per-backend limits allow)."""
        unbounded = self.backends_per_map * self.options_per_backend
        return self._announced("options_per_request", unbounded)

    def _announced(self, fact: str, limit: int) -> int:
        value = self.hello.fact(fact)
        return min(value, limit) if isinstance(value, int) and value > 0 else limit

    def restart(self) -> None:
        """Stop the agent; the next request starts a fresh one (empty registry)."""
        self.close()

    def take_over(self, other: CaseRunner) -> None:
        """Go on on ``other``'s device (a pool's next board): this agent stopped, the next
        one started, and programs pushed, by ``other``'s device."""
        self.close()
        self._start_link, self._program_for = other._start_link, other._program_for
        self._push_program, self._forget_program = other._push_program, other._forget_program

    def program_for(self, delegate_ids: tuple[str, ...]) -> str:
        """The device path of a probe program whose delegates are ``delegate_ids``."""
        return self._program_for(delegate_ids)

    def close(self) -> None:
        self._broken = None
        if self._link is not None:
            link, self._link = self._link, None
            self._hello = None
            self._registered = []
            self._dirty = False
            link.close()

    # ---- probes --------------------------------------------------------------------

    def prepare(self, names: Sequence[str]) -> None:
        """Make sure probe backends named ``names`` are registered (any names: calling it
        declares them probes).

        Registered names stay for the agent's lifetime (the runtime cannot
        unregister), so when the registry lacks room the agent is restarted; that is
        only allowed between cases. Call this first in a case that needs many names.
        """
        self._declared.update(names)
        missing = [n for n in dict.fromkeys(names) if n not in self.registered]
        if not missing:
            return
        if len(self._registered) + len(missing) > self.capacity:
            if self._dirty:
                raise RunnerError(
                    f"the registry has no room for {missing} and this case has already set "
                    "state that a restart would lose; call et.prepare(all names) at the start "
                    "of the case"
                )
            self.restart()
            missing = [n for n in dict.fromkeys(names) if n not in self.registered]
            room = self.capacity - len(self._registered)
            kept = [entry.name for entry in self.hello.entries if entry.is_probe]
            if len(missing) > room and kept:
                raise RegistryKept(
                    f"the device kept its registry across an agent restart ({len(kept)} "
                    f"probe backends of an earlier session: {', '.join(kept[:4])}"
                    f"{', ...' if len(kept) > 4 else ''}), so {len(missing)} more do not fit "
                    f"in its {self.capacity}: nothing resets the board; set transport.reset "
                    "(dtr or rts, the line wired to its reset), labgrid reset: power, or "
                    "flash firmware that serves REBOOT (HELLO capabilities)"
                )
            if len(missing) > room:
                raise RunnerError(
                    f"{len(missing)} probe backends needed but the registry holds "
                    f"{self.capacity} and the device registers {self._registered} itself: "
                    f"at most {room} probes fit"
                )
        report = self.register(missing)
        failed = [e for e in report.entries if e.status != RuntimeErrorCode.Ok]
        if failed:
            raise RunnerError(
                "registering probe backends failed: "
                + ", ".join(f"{e.name}: status 0x{e.status:02x}" for e in failed)
            )

    def register(self, names: Sequence[str]) -> Report:
        """Send REGISTER for ``names`` as they are and return the report unchecked."""
        report = self._exchange(lambda link: link.request(Request.register(tuple(names))))
        for entry in report.entries:
            if entry.status == RuntimeErrorCode.Ok and entry.name not in self._registered:
                self._registered.append(entry.name)
        return report

    # ---- cases ---------------------------------------------------------------------

    def heed(
        self,
        options: OptionsMap,
        route: Route,
        probes: Sequence[str] = (),
        strict: bool | None = None,
    ) -> tuple[OptionWarning, ...]:
        """The judgement of a map about to travel ``route`` (:func:`harness.check.heed_options`):
        a warning per option without effect, :class:`~harness.check.OptionsWithoutEffect`
        when ``strict`` (default :attr:`strict_options`); nothing while
        :attr:`options_judged` is off. ``probes`` take any option."""
        if not self.options_judged:
            return ()
        strict = self.strict_options if strict is None else strict
        return heed_options(options, route, probes=probes, strict=strict)

    @contextlib.contextmanager
    def unjudged(self) -> Iterator[None]:
        """Maps sent within are not judged: a test of what a backend does with options that
        have no effect (``@pytest.mark.options_without_effect`` for a whole test)."""
        judging, self.options_judged = self.options_judged, False
        try:
            yield
        finally:
            self.options_judged = judging

    def load(
        self,
        options: OptionsMap | str | os.PathLike[str],
        delegates: Sequence[str] | None = None,
        *,
        unobserved: Sequence[str] = (),
        path: LoadPath = LoadPath.PROGRAM,
        stored: OptionsMap | None = None,
        keep: bool = False,
        method: str = "",
        program: str | None = None,
        probes: Sequence[str] = (),
        record: bool = True,
    ) -> Verdict:
        """Load a probe program through ``path`` so that its delegates must receive
        ``options``; check every init.

        ``delegates`` defaults to the map's backends a program of the harness's can
        check (:func:`harness.probes.plan_load`: its probes, then ``XnnpackBackend``); a
        backend of the map the device has none of is then a ``NO_SUCH_BACKEND``
        difference. ``unobserved`` names real (non-probe) backends among them.
        ``probes`` declares probe names beside the harness's own (``Probe...``): only
        those are registered. On ``module_both`` ``options`` is the
        explicit map of ``Module::load_method`` and ``stored`` the map given to
        ``Module::load`` before it (default: one decoy option per backend, which must
        never arrive); other paths take no ``stored``. ``keep`` and ``method`` load a
        method into the program or module already loaded (wire-format.md, LOAD).
        ``program`` is the device path of another program whose ``method`` delegates
        to ``delegates`` (:meth:`check_program`). ``options`` may be a map file's path;
        the map is judged first (:meth:`heed`). ``record=False`` keeps the verdict from
        the test's records (the effect check's further runs, :mod:`harness.program_effects`).
        """
        options = as_map(options)
        self.heed(options, Route.LOAD, probes)
        if stored is not None and path is not LoadPath.MODULE_BOTH:
            raise RunnerError(f"a stored map goes with path module_both only, not {path.label}")
        absent: tuple[str, ...] = ()
        self._forget_undeclared(options.backend_ids, probes)
        if delegates is None:
            plan = plan_load(
                options,
                registered=self.registered,
                real=self.real_backends,
                recorded=self.recorded,
                declared=probes,
            )
            delegates, absent = plan.delegates, plan.absent
            unobserved = tuple(dict.fromkeys((*unobserved, *plan.unobserved)))
        program_ids = tuple(delegates)
        self._prepare_probes([d for d in program_ids if d not in unobserved], probes)
        if program is None:
            program = self._program_for(program_ids)
        self._dirty = True
        first, explicit = options, None
        if path is LoadPath.MODULE_BOTH:  # options is the explicit map, behind a stored one
            first = stored if stored is not None else _decoy(program_ids, options)
            explicit = options
        request = Request.load(
            program,
            program_ids,
            first,
            path=path,
            method_options=explicit,
            keep=keep,
            method=method,
        )
        report = self._exchange(lambda link: link.request(self._served(request)))
        verdict = check_load(
            request.delivered,
            program_ids,
            report,
            unobserved=unobserved,
            path=path,
            recorded=self.recorded,
            absent=absent,
        )
        return self._record(verdict, "et.load") if record else verdict

    def load_models(
        self,
        models: Sequence[ModelLoad],
        *,
        concurrent: bool = False,
        unobserved: Sequence[str] = (),
        probes: Sequence[str] = (),
    ) -> tuple[Verdict, ...]:
        """Load several models in one LOAD, each its own program instance with its own
        map; check every model's inits against its own map alone.

        The device loads them in order, or with ``concurrent`` each on a thread of its
        own, all started together, and executes each once. Returns one verdict per
        model (model 0 first); an option of another model is a CROSS_MODEL difference.
        ``unobserved`` names real (non-probe) backends among the delegates; ``probes``
        declares probe names, as for :meth:`load`.
        """
        if not 1 <= len(models) <= self.max_models:
            raise RunnerError(
                f"{len(models)} models asked for; the device holds 1 to {self.max_models} "
                "per LOAD (max_models in HELLO): skip the case on this device"
            )
        for model in models:
            self.heed(model.options, Route.LOAD, probes)
        names = [d for m in models for d in m.program_ids if d not in unobserved]
        self._forget_undeclared(names, probes)
        self._prepare_probes(names, probes)
        specs = [m.spec(self._program_for(m.program_ids)) for m in models]
        self._dirty = True
        first = specs[0]
        request = Request.load(
            first.program,
            first.delegates,
            first.options,
            path=first.path,
            method_options=first.method_options,
            method=first.method,
            models=tuple(specs[1:]),
            concurrent=concurrent,
        )
        report = self._exchange(lambda link: link.request(self._served(request)))
        return tuple(
            self._record(v, "et.load_models")
            for v in check_models(request, report, unobserved=unobserved, recorded=self.recorded)
        )

    def check_program(
        self,
        program: str | os.PathLike[str],
        options: OptionsMap | MapFile | str | os.PathLike[str] | None = None,
        *,
        probes: Sequence[str] = (),
        strict: bool | None = None,
        reference: Mapping[str, Sequence[float]] | None = None,
    ) -> ProgramCheck:
        """Check a program file (a user's own ``.pte``) on this device: every method it
        holds, loaded through every load path the agent announces with ``options`` (a
        map or a map file), each delegate's ``init`` checked exactly. Delegates named
        in ``probes`` are the harness's probes; every other must be a backend the
        device has. The map is judged once, as :meth:`heed` judges it (the probes' options
        unjudged); ``strict`` overrides :attr:`strict_options` (pytest's
        ``--strict-options``). An option that changes an output element is a failure;
        ``reference`` gives per method the elements its first output must have. What each
        option did goes to :attr:`on_options` (the test's records). See
        :mod:`harness.program_check`."""
        from harness.program_check import check_program

        if self._push_program is None:
            raise RunnerError("this runner has no way to push a program file to its device")
        sent = OptionsMap() if options is None else options
        checked = check_program(
            self,
            self._push_program,
            program,
            sent,
            probes=probes,
            strict=strict,
            forget=self._forget_program,
            reference=reference,
        )
        if self.on_options is not None and checked.options:
            self.on_options(checked.options)
        return checked

    def execute(self) -> Report:
        """Execute the loaded program (every loaded model, in model order) once more."""
        return self._exchange(lambda link: link.request(Request(Action.EXECUTE)))

    def set(
        self,
        options: OptionsMap | str | os.PathLike[str],
        expected_status: Mapping[str, int] | None = None,
        *,
        probes: Sequence[str] = (),
    ) -> Verdict:
        """``set_option`` for each backend of ``options`` (a map, or a map file's path,
        judged first: :meth:`heed`); check status and delivery.

        Probes are registered first (the harness's own names and ``probes``), except names
        expected to give NotFound; a backend the device has none of gets the runtime's
        NotFound, a ``NO_SUCH_BACKEND`` difference unless expected.
        """
        options = as_map(options)
        self.heed(options, Route.SET, probes)
        expected_status = dict(expected_status or {})
        absent = self._prepare_calls(options, expected_status, probes)
        self._dirty = True
        report = self._exchange(lambda link: link.request(Request(Action.SET, options)))
        return self._record(
            check_set(options, report, expected_status, recorded=self.recorded, absent=absent),
            "et.set",
        )

    def get(
        self,
        requested: OptionsMap | str | os.PathLike[str],
        expected: OptionsMap | str | os.PathLike[str] | None = None,
        expected_status: Mapping[str, int] | None = None,
        *,
        probes: Sequence[str] = (),
    ) -> Verdict:
        """``get_option`` for each backend of ``requested``; check the values read back.
        Either map may be a map file's path; ``requested`` is judged first (:meth:`heed`).
        Probes and backends the device lacks as for :meth:`set`."""
        requested = as_map(requested)
        expected = None if expected is None else as_map(expected)
        self.heed(requested, Route.GET, probes)
        expected_status = dict(expected_status or {})
        absent = self._prepare_calls(requested, expected_status, probes)
        report = self._exchange(lambda link: link.request(Request(Action.GET, requested)))
        verdict = check_get(
            requested, report, expected, expected_status, recorded=self.recorded, absent=absent
        )
        return self._record(verdict, "et.get")

    def reset(self) -> Report:
        """Forget the loaded program and everything the probes recorded or were set."""
        report = self._exchange(lambda link: link.request(Request(Action.RESET)))
        if report.outcome is not Outcome.OK:
            raise RunnerError(f"the agent refused RESET: {report.message}")
        self._dirty = False
        self._declared.clear()
        return report

    def send(self, request: Request) -> Report:
        """Send any request as it is (no registration, no checks)."""
        self._dirty = True
        return self._exchange(lambda link: link.request(self._served(request)))

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

    def send_raw(self, frame: bytes, seq: int) -> Report:
        """Send raw bytes, e.g. a deliberately malformed frame, and read the report."""
        self._dirty = True
        return self._exchange(lambda link: link.send_raw(frame, seq))

    def _record(self, verdict: Verdict, method: str) -> Verdict:
        """``verdict``, naming the caller's line that made it, handed to ``on_verdict``."""
        verdict = dataclasses.replace(verdict, made_at=f"{_caller()} {method}")
        if self.on_verdict is not None:
            self.on_verdict(verdict)
        return verdict

    def _prepare_calls(
        self, options: OptionsMap, expected_status: Mapping[str, int], probes: Sequence[str]
    ) -> tuple[str, ...]:
        """Register the probes a SET or GET needs; the backends of ``options`` the device
        then has none of."""
        self._forget_undeclared(options.backend_ids, probes)
        expecting = [
            n for n in options.backend_ids if expected_status.get(n) != RuntimeErrorCode.NotFound
        ]
        self._prepare_probes(expecting, probes)
        return tuple(n for n in options.backend_ids if n not in self._registered)

    def _forget_undeclared(self, names: Sequence[str], declared: Sequence[str]) -> None:
        """Restart the agent when ``names`` hold a probe an earlier case declared and this
        case does not (:func:`harness.probes.undeclared_probes`; a declaration, ``probes=``
        or :meth:`prepare`, holds until :meth:`reset`): without it the device has no such
        backend, and the verdict must say so, not find a probe."""
        refuse_real_probes(declared, self.real_backends)
        self._declared.update(declared)
        at_start = {entry.name for entry in self.hello.entries}  # a restart would keep them
        since = [n for n in self.registered if n not in at_start]
        stale = undeclared_probes(names, since, self._declared)
        if not stale:
            return
        if self._dirty:
            raise RunnerError(
                f"{', '.join(stale)}: a probe an earlier case declared, registered until the "
                "agent restarts, and this case has state a restart would lose: declare it in "
                "this case (probes=, et.prepare), or name it before anything else is sent"
            )
        self.restart()

    def _prepare_probes(self, names: Sequence[str], declared: Sequence[str]) -> None:
        """Register those of ``names`` that are probes (:func:`harness.probes.probes_to_register`):
        the harness's own names and ``declared``, never a name of the device's backends."""
        refuse_real_probes(declared, self.real_backends)
        self.prepare(probes_to_register(names, self.registered, declared))


def open_runner(
    profile: DeviceProfile,
    *,
    board_reset: Callable[[], None] | None = None,
    time_limit: TimeLimit | None = None,
    on_link: Callable[[AgentLink], None] | None = None,
) -> tuple[Device, CaseRunner]:
    """``profile``'s device, brought up, and a :class:`CaseRunner` on its agent (started
    on first use, within ``time_limit``); close the runner, then the device.

    ``board_reset`` resets the board through a lab; ``on_link`` is given every link the
    runner starts (the farm keeps them, to show an agent's stderr with a failed test).
    """
    from harness.devices.bring_up import open_device  # the kind's modules, on demand

    device = open_device(profile, board_reset=board_reset)

    def start_link() -> AgentLink:
        link = device.start_link(time_limit=time_limit)
        if on_link is not None:
            on_link(link)
        return link

    return device, CaseRunner(
        start_link,
        device.program_for,
        time_limit=time_limit,
        push_program=device.push_program,
        forget_program=device.forget_program,
        device_files=device if device.has_files else None,
    )


_HARNESS_DIR = str(Path(__file__).resolve().parent)


def _caller() -> str:
    """``file:line`` of the innermost frame outside the harness package: the test's call."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_HARNESS_DIR):
        frame = frame.f_back
    path = Path(frame.f_code.co_filename)
    try:
        shown = path.relative_to(Path.cwd())
    except ValueError:
        shown = path
    return f"{shown}:{frame.f_lineno}"


def _decoy(delegates: Sequence[str], options: OptionsMap) -> OptionsMap:
    """A stored map with :data:`STORED_DECOY` for each backend a load may deliver to."""
    ids = list(dict.fromkeys([*options.backend_ids, *delegates]))[:MAX_LOAD_BACKENDS]
    return OptionsMap(tuple(BackendOptions(b, (STORED_DECOY,)) for b in ids))
