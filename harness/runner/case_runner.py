"""The case runner's core: option-map cases on one device, probes registered, verdicts checked.

:class:`CaseRunner` turns "send this map" into the right requests to the device's agent
(:class:`~harness.session.agent_requests.AgentRequests`, which starts it and keeps it)
and a :class:`Verdict`, keeping track of which probe backends the device's registry
holds. :mod:`harness.runner` is its public face (with the program check on top).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from harness.codec.mapfile import as_map
from harness.data.messages import LoadPath, Outcome, Report, Request
from harness.data.options import OptionsMap
from harness.data.runtime_error import RuntimeErrorCode
from harness.runner.probes import (
    plan_load,
    probes_to_register,
    refuse_real_probes,
    undeclared_probes,
)
from harness.session.agent_requests import AgentRequests, RunnerError
from harness.session.agent_session import Session, TimeLimit
from harness.session.announced import Announced
from harness.session.load_request import ModelLoad, load_request
from harness.transport.base import TransportError

if TYPE_CHECKING:
    from harness.check.option_outcomes import OptionOutcome

__all__ = ["CaseRunner", "DeviceFiles", "RegistryKept"]


class DeviceFiles(Protocol):
    """A device's files, as far as an option's declared effect needs them (a
    :class:`~harness.devices.base.Device` with a file system is one)."""

    def file_exists(self, remote: str) -> bool: ...

    def remove_file(self, remote: str) -> None: ...


class RegistryKept(TransportError):
    """A restarted agent still holds the probes of an earlier session (a board nothing
    could reset) and the case needs room it lacks: device trouble, not the case's."""


class CaseRunner(Announced):
    """Runs cases on one device through an agent session that it starts and restarts.

    ``start_session`` starts a fresh agent (a new process, or a rebooted MCU) and
    returns its session; ``program_for`` returns the device path of a probe program
    whose delegates are the given ids, pushing it first if needed ("" on devices
    without a file system); ``time_limit`` (e.g. the run's deadline) is checked
    before every request; ``push_program`` returns the device path of a program
    file, pushed if needed (with an inputs file beside it, if given), and
    ``forget_program`` removes one a load found damaged (``check_program``);
    ``device_files`` looks for and removes the files an option's declared effect leaves
    (None: the device has no file system).
    """

    def __init__(
        self,
        start_session: Callable[[], Session],
        program_for: Callable[[tuple[str, ...]], str],
        time_limit: TimeLimit | None = None,
        push_program: Callable[[Path, Path | None], str] | None = None,
        forget_program: Callable[[str], None] | None = None,
        device_files: DeviceFiles | None = None,
    ) -> None:
        self._agent = AgentRequests(start_session, time_limit)
        self._program_for = program_for
        self._push_program = push_program
        self._forget_program = forget_program
        self.device_files = device_files  # where an option's declared file is looked for
        self._declared: set[str] = set()  # probe names declared in this case (until reset)
        self._dirty = False  # state was set since the last reset: a restart would lose it
        self.on_verdict: Callable[[Verdict], None] | None = None  # e.g. the run's summary
        # what each option did in a program check (the report's "what the options did")
        self.on_options: Callable[[tuple[OptionOutcome, ...]], None] | None = None
        # Every map sent is judged (heed_options): options its backends will ignore are
        # warnings, failures with --strict-options; options_judged False: not judged.
        self.strict_options = False
        self.options_judged = True

    # ---- the agent -----------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The running agent's session, started on first use.

        :class:`SessionBroken` once a request on it failed with device trouble.
        """
        return self._agent.session

    @property
    def broken(self) -> bool:
        """True once a request failed with device trouble, until the agent is restarted."""
        return self._agent.broken

    @property
    def hello(self) -> Report:
        """The agent's HELLO report: facts and the backends registered at start."""
        return self._agent.hello

    @property
    def registered(self) -> tuple[str, ...]:
        """Backend names the device's registry holds now."""
        return self._agent.registered

    def restart(self) -> None:
        """Stop the agent; the next request starts a fresh one (empty registry)."""
        self.close()

    def take_over(self, other: CaseRunner) -> None:
        """Go on on ``other``'s device (a pool's next board): this agent stopped, the next
        one started, and programs pushed, by ``other``'s device."""
        self.close()
        self._agent.start_session, self._program_for = (
            other._agent.start_session,
            other._program_for,
        )
        self._push_program, self._forget_program = other._push_program, other._forget_program

    def program_for(self, delegate_ids: tuple[str, ...]) -> str:
        """The device path of a probe program whose delegates are ``delegate_ids``."""
        return self._program_for(delegate_ids)

    def close(self) -> None:
        if self._agent.started:
            self._dirty = False
        self._agent.close()

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
        if len(self.registered) + len(missing) > self.capacity:
            if self._dirty:
                raise RunnerError(
                    f"the registry has no room for {missing} and this case has already set "
                    "state that a restart would lose; call et.prepare(all names) at the start "
                    "of the case"
                )
            self.restart()
            missing = [n for n in dict.fromkeys(names) if n not in self.registered]
            room = self.capacity - len(self.registered)
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
                    f"{self.capacity} and the device registers {list(self.registered)} itself: "
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
        return self._agent.register(names)

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
        check (:func:`harness.runner.probes.plan_load`: its probes, then ``XnnpackBackend``); a
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
        the test's records (the effect check's further runs, :mod:`harness.runner.program_effects`).
        """
        options = as_map(options)
        self.heed(options, Route.LOAD, probes)
        if stored is not None and path is not LoadPath.MODULE_BOTH:
            raise RunnerError(f"a stored map goes with path module_both only, not {path.label}")
        self._forget_undeclared(options.backend_ids, probes)
        program_ids, absent, unobserved = self._plan(options, delegates, unobserved, probes)
        self._prepare_probes([d for d in program_ids if d not in unobserved], probes)
        if program is None:
            program = self._program_for(program_ids)
        self._dirty = True
        model = ModelLoad(options, program_ids, path, stored, method)
        request = load_request(model.spec(program), keep=keep)
        report = self._agent.send(request)
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

    def _plan(
        self,
        options: OptionsMap,
        delegates: Sequence[str] | None,
        unobserved: Sequence[str],
        probes: Sequence[str],
    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """A load's delegates, the backends of ``options`` the device has none of, and the
        unobserved delegates: ``delegates`` as given, else
        :func:`harness.runner.probes.plan_load`'s."""
        if delegates is not None:
            return tuple(delegates), (), tuple(unobserved)
        plan = plan_load(
            options,
            registered=self.registered,
            real=self.real_backends,
            recorded=self.recorded,
            declared=probes,
        )
        unobserved = tuple(dict.fromkeys((*unobserved, *plan.unobserved)))
        return tuple(plan.delegates), plan.absent, unobserved

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
        request = load_request(specs[0], models=tuple(specs[1:]), concurrent=concurrent)
        report = self._agent.send(request)
        return tuple(
            self._record(v, "et.load_models")
            for v in check_models(request, report, unobserved=unobserved, recorded=self.recorded)
        )

    def execute(self) -> Report:
        """Execute the loaded program (every loaded model, in model order) once more."""
        return self._agent.execute()

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
        report = self._agent.set(options)
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
        report = self._agent.get(requested)
        verdict = check_get(
            requested, report, expected, expected_status, recorded=self.recorded, absent=absent
        )
        return self._record(verdict, "et.get")

    def reset(self) -> Report:
        """Forget the loaded program and everything the probes recorded or were set."""
        report = self._agent.reset()
        if report.outcome is not Outcome.OK:
            raise RunnerError(f"the agent refused RESET: {report.message}")
        self._dirty = False
        self._declared.clear()
        return report

    def send(self, request: Request) -> Report:
        """Send any request as it is (no registration, no checks)."""
        self._dirty = True
        return self._agent.send(request)

    def send_raw(self, frame: bytes, seq: int) -> Report:
        """Send raw bytes, e.g. a deliberately malformed frame, and read the report."""
        self._dirty = True
        return self._agent.send_raw(frame, seq)

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
        return tuple(n for n in options.backend_ids if n not in self.registered)

    def _forget_undeclared(self, names: Sequence[str], declared: Sequence[str]) -> None:
        """Restart the agent when ``names`` hold a probe an earlier case declared and this
        case does not (:func:`harness.runner.probes.undeclared_probes`; a declaration, ``probes=``
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
        """Register those of ``names`` that are probes
        (:func:`harness.runner.probes.probes_to_register`): the harness's own names and
        ``declared``, never a name of the device's backends."""
        refuse_real_probes(declared, self.real_backends)
        self.prepare(probes_to_register(names, self.registered, declared))


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
