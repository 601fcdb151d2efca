"""A user's own program checked on a device (``et.check_program``, ``et-harness send
--program``): every method, every load path, every delegate's ``init`` exactly.

The program file is read within :data:`~harness.programs.contents.MAX_PROGRAM_BYTES`
and its methods and delegates are read from the program itself
(:mod:`harness.programs.contents`); the bytes read are what is pushed, named by
their content, so a device that has them already is not sent them again. Each method
is loaded (and executed once, with inputs the agent builds from the method's metadata)
through each load path the agent announces; the map must reach each delegate as it
would reach a probe: its own entry, exactly (on ``module_both`` as the explicit map,
with a decoy stored map that must never arrive). What the options did to the outputs is
checked too (:mod:`harness.runner.program_effects`): each run with the map against a baseline
without it, over several executes and loads, at load time and through ``set_option``,
each option by what it may change (its contract's or the map file's declaration), the
files options declare looked for after each load, and against the reference outputs
given with the program. A BundledProgram (``.bpte``, :mod:`harness.programs.bundled`)
runs each method once per test case, with the case's inputs (an inputs file pushed beside
the program), every run against the case's expected outputs
(:mod:`harness.check.expected_outputs`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.check import DeliveryMismatch
from harness.check.expected_outputs import ExpectedOutput, Tolerance, first_off
from harness.check.option_contracts import OptionWarning, Route, judged_effects
from harness.check.option_outcomes import OptionOutcome, option_outcomes
from harness.check.output_effects import (
    EffectNotObserved,
    FileObservation,
    OptionsChangedOutputs,
    OutputEffect,
    OutputsOffReference,
)
from harness.check.rendering import ignored_line
from harness.codec.mapfile import MapFile, as_map_file
from harness.data.messages import LoadPath, Outcome
from harness.data.options import OptionsMap
from harness.data.outputs import TensorOutput
from harness.data.runtime_error import RuntimeErrorCode, describe_status
from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import CacheEntry
from harness.lifecycle.disk import writing
from harness.programs.bundled import ATOL, RTOL, BundledProgram, inputs_file, read_checked
from harness.programs.contents import ProgramContents, ProgramError
from harness.runner.probes import refuse_real_probes
from harness.runner.program_effects import (
    GLOBAL,
    FileWatch,
    Run,
    Target,
    clear,
    effects_of,
    files_due,
    global_runs,
    load_runs,
    observe,
    unobservable,
)

USER_PROGRAM_KIND = "user-program"

if TYPE_CHECKING:
    from harness.check import Verdict
    from harness.runner.case_runner import CaseRunner


@dataclass(frozen=True)
class MethodVerdict:
    """One method of the program loaded through one path, and its verdict."""

    method: str
    path: LoadPath
    verdict: Verdict
    outputs: tuple[TensorOutput, ...] = ()  # the first execute's, with the map
    case: int | None = None  # the BundledProgram test case whose inputs it ran with


@dataclass(frozen=True)
class ProgramCheck:
    """Every method of a program on every load path of one device, the options of the
    map its backends will ignore (``warnings``: under ``--strict-options`` the map is
    refused before it travels, :class:`OptionsWithoutEffect`), what the options changed
    in the outputs (``effects``) and the outputs off the reference."""

    program: str
    methods: tuple[str, ...]
    results: tuple[MethodVerdict, ...]
    warnings: tuple[OptionWarning, ...] = ()
    effects: tuple[OutputEffect, ...] = ()
    off_reference: tuple[str, ...] = ()
    files: tuple[FileObservation, ...] = ()  # the declared files looked for, per load path
    options: tuple[OptionOutcome, ...] = ()  # what each option of the map did

    @property
    def ok(self) -> bool:
        return (
            all(r.verdict.ok for r in self.results)
            and not any(e.judged for e in self.effects)
            and not self.off_reference
            and not self.files_missing
        )

    @property
    def files_missing(self) -> tuple[FileObservation, ...]:
        """The declared files a load with the map did not leave."""
        return tuple(o for o in self.files if o.observed is False)

    def render(self) -> str:
        """Each method and path's verdict and outputs, the backends every load ignored
        (once), what the options changed, then one
        line for the program (the warnings themselves are Python's,
        :class:`NoEffectWarning`: ``send`` prints them below)."""
        parts = []
        for r in self.results:
            case = "" if r.case is None else f", test case {r.case}"
            parts.append(f"method {r.method!r}{case}, {r.verdict.render(ignored=False)}")
            parts += [f"  {output.render()}" for output in r.outputs]
        ignored = dict.fromkeys(b for r in self.results for b in r.verdict.ignored_backends)
        parts += [ignored_line(ignored)] if ignored else []
        parts += [("FAILED: " if e.judged else "note: ") + e.describe() for e in self.effects]
        parts += [_file_line(o) for o in self.files]
        parts += [o.describe() for o in self.options]
        parts += [f"FAILED: {text}" for text in self.off_reference]
        exact = sum(r.verdict.ok for r in self.results)
        methods = f"{len(self.methods)} method{'' if len(self.methods) == 1 else 's'}"
        cases = len({(r.method, r.case) for r in self.results if r.case is not None})
        methods += f" ({cases} test case{'' if cases == 1 else 's'})" if cases else ""
        line = f"program {self.program}: {methods} x load paths = {len(self.results)} loads, "
        line += f"{exact} exact"
        if self.warnings:
            count = len(self.warnings)
            line += f"; {count} option{'' if count == 1 else 's'} without effect (warnings)"
        changed = sum(e.judged for e in self.effects)
        line += f"; outputs changed by options in {changed}" if changed else ""
        missing = len(self.files_missing)
        line += f"; declared files missing in {missing}" if missing else ""
        parts.append(line)
        return "\n".join(parts)

    def raise_for_differences(self) -> None:
        """Raise the first verdict's :class:`DeliveryMismatch` that did not pass (where the
        runtime refused the method, :class:`MethodFailed` says why on its first line), then
        :class:`OptionsChangedOutputs` for the options that changed an output, then
        :class:`EffectNotObserved` for a declared file a load did not leave, then
        :class:`OutputsOffReference`."""
        for result in self.results:
            if result.verdict.report.outcome is Outcome.RUNTIME_ERROR:
                raise MethodFailed(self.program, result)
            result.verdict.raise_for_differences()
        judged = [e for e in self.effects if e.judged]
        if judged:
            raise OptionsChangedOutputs(judged)
        if self.files_missing:
            raise EffectNotObserved(self.files_missing)
        if self.off_reference:
            raise OutputsOffReference("\n".join(self.off_reference))


class MethodFailed(DeliveryMismatch):
    """A method of the program did not load or run: the runtime's error and the agent's
    message (which names any missing operator) first, then the verdict."""

    def __init__(self, program: str, result: MethodVerdict) -> None:
        super().__init__(result.verdict)
        report = result.verdict.report
        self.args = (
            f"{program}: method {result.method!r} failed on load path {result.path.label}: "
            f"{describe_status(report.detail)}, {report.message}\n{self.args[0]}",
        )


def check_program(
    runner: CaseRunner,
    push: Callable[[Path, Path | None], str],
    program: str | os.PathLike[str],
    options: OptionsMap | MapFile | str | os.PathLike[str],
    *,
    probes: Sequence[str] = (),
    strict: bool | None = None,
    forget: Callable[[str], None] | None = None,
    reference: Mapping[str, Sequence[float]] | None = None,
) -> ProgramCheck:
    """Check ``program`` (a ``.pte``, or a BundledProgram ``.bpte``) with ``options`` on
    ``runner``'s device (see the module). The map is judged once, as the runner judges
    every map (:meth:`CaseRunner.heed`, with ``strict`` if given): its options the
    backends will ignore are warnings, or :class:`OptionsWithoutEffect` before anything
    travels. A ``.bpte``'s methods run with each of their test cases' inputs, every run
    compared with the case's expected outputs (:mod:`harness.programs.bundled`);
    the other methods with the agent's seeded inputs, compared with ``reference`` where
    it gives the method the elements of its first output (within 1e-5 + 1e-4 times the
    reference element). When a load says the program is damaged, its copies (the cache's,
    and the device's through ``forget``) are removed at once: the next check sends it
    again."""
    bundle = read_checked(program)
    contents = bundle.program
    map_file = as_map_file(options)
    sent = map_file.options
    ignored = runner.heed(sent, Route.LOAD, probes, strict)
    judged = judged_effects(sent, probes=probes, declared=map_file.effects)
    _check_backends(contents, runner.real_backends, probes)
    cached = _cached_copy(contents.data, contents.source, ".pte")
    found = _Found(watches=[(w, unobservable(runner, w)) for w in files_due(sent, judged)])
    with runner.unjudged():  # judged once above, not once per load
        for method in contents.methods:
            for case, inputs, expected in _input_sets(bundle, method.name, reference):
                remote = push(cached, inputs)
                found.remotes.append(remote)
                target = Target(remote, method, tuple(probes), judged)
                _check_method(runner, target, sent, case, expected, found)
    clear(runner, found.watches)
    if any(_says_damaged(r.verdict) for r in found.results):
        CacheEntry(USER_PROGRAM_KIND, cached).discard()
        if forget is not None:
            for remote in dict.fromkeys(found.remotes):
                forget(remote)
    methods = tuple(m.name for m in contents.methods)
    verdicts = [r.verdict for r in found.results]
    outcomes = option_outcomes(sent, judged, verdicts, found.effects, found.files)
    return ProgramCheck(
        bundle.source,
        methods,
        tuple(found.results),
        ignored,
        tuple(found.effects),
        tuple(found.off),
        tuple(found.files),
        outcomes,
    )


def _file_line(observation: FileObservation) -> str:
    if observation.observed is False:
        return f"FAILED: {observation.describe()}"
    return ("ok: " if observation.observed else "note: ") + observation.describe()


@dataclass(frozen=True)
class _Found:
    """What the runs of one check found, gathered method by method."""

    remotes: list[str] = field(default_factory=list)
    results: list[MethodVerdict] = field(default_factory=list)
    effects: list[OutputEffect] = field(default_factory=list)
    off: list[str] = field(default_factory=list)
    files: list[FileObservation] = field(default_factory=list)
    watches: list[tuple[FileWatch, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Expected:
    """The outputs every run of a method must give, within ``tolerance``: compared here
    (the reference's), or by the agent (a test case's, given beside the program)."""

    outputs: tuple[ExpectedOutput, ...]
    tolerance: Tolerance
    by_agent: bool = False


_REFERENCE_TOLERANCE = Tolerance(rtol=1e-4, atol=1e-5)


def _input_sets(
    bundle: BundledProgram, method: str, reference: Mapping[str, Sequence[float]] | None
) -> list[tuple[int | None, Path | None, _Expected | None]]:
    """Each test case of ``method`` (its number, its inputs file, its expected outputs);
    without any, the seeded inputs once, with the reference if there is one."""
    cases = bundle.cases.get(method, ())
    if not cases:
        wanted = None if reference is None else reference.get(method)
        if wanted is None:
            return [(None, None, None)]
        given = (ExpectedOutput(0, tuple(float(v) for v in wanted)),)
        return [(None, None, _Expected(given, _REFERENCE_TOLERANCE))]
    by_agent = _Expected((), Tolerance(rtol=RTOL, atol=ATOL), by_agent=True)
    return [
        (case.index, _cached_copy(inputs_file(method, case), bundle.source, ".inputs"), by_agent)
        for case in cases
    ]


def _check_method(
    runner: CaseRunner,
    target: Target,
    sent: OptionsMap,
    case: int | None,
    expected: _Expected | None,
    found: _Found,
) -> None:
    """One method with one set of inputs on every load path: with the map (the delivery
    check), without it (the baseline), through ``set_option``; each run's outputs against
    the baseline's and the expected ones."""
    name = target.method.name
    where = f"method {name!r}" + ("" if case is None else f", test case {case}")
    baselines: dict[LoadPath, tuple[Run, ...]] = {}
    for path in runner.load_paths:
        if sent.backends:
            baselines[path] = load_runs(runner, target, OptionsMap(), path)[1]
        clear(runner, found.watches)
        verdict, runs = load_runs(runner, target, sent, path, checked=True)
        found.files.extend(observe(runner, found.watches, name, path) if runs else [])
        found.results.append(MethodVerdict(name, path, verdict, _first(runs), case))
        found.effects.extend(effects_of(runner, target, sent, path, baselines.get(path, ()), runs))
        if expected is not None:
            found.off.extend(
                _off_expected(where, path, "without the map", baselines.get(path, ()), expected)
            )
            found.off.extend(_off_expected(where, path, "with the map", runs, expected))
    if sent.backends and baselines.get(LoadPath.PROGRAM):
        runs = global_runs(runner, target, sent)
        baseline = baselines[LoadPath.PROGRAM]
        found.effects.extend(
            effects_of(runner, target, sent, LoadPath.PROGRAM, baseline, runs, GLOBAL)
        )
        if expected is not None:
            found.off.extend(_off_expected(where, LoadPath.PROGRAM, GLOBAL, runs, expected))


def _first(runs: Sequence[Run]) -> tuple[TensorOutput, ...]:
    return runs[0].outputs if runs else ()


def _off_expected(
    where: str, path: LoadPath, how: str, runs: Sequence[Run], expected: _Expected
) -> list[str]:
    """One line for the first run whose outputs leave the expected ones: as the agent
    compared them where it was given them (every element, however many), else here."""
    for run in runs:
        if expected.by_agent:
            off = None if run.expected == "ok" else run.expected
            if run.expected is None:
                off = "the agent compared nothing (no fact 'expected'): rebuild the agent"
        else:
            off = first_off(expected.outputs, run.outputs, expected.tolerance)
        if off is not None:
            tolerance = f"rtol {expected.tolerance.rtol:g}, atol {expected.tolerance.atol:g}"
            return [f"{where}, load path {path.label} ({how}), {run.label}: {off} ({tolerance})"]
    return []


def _says_damaged(verdict: Verdict) -> bool:
    """The runtime refused the program itself (``Error::InvalidProgram``)."""
    report = verdict.report
    return (
        report.outcome is Outcome.RUNTIME_ERROR and report.detail == RuntimeErrorCode.InvalidProgram
    )


def _check_backends(contents: ProgramContents, real: Sequence[str], probes: Sequence[str]) -> None:
    """Every delegate is a backend the device has, or one of the harness's probes."""
    refuse_real_probes(probes, real)
    for method in contents.methods:
        for delegate in method.delegates:
            if delegate not in real and delegate not in probes:
                raise ProgramError(
                    f"{contents.source}: method {method.name!r} delegates to {delegate!r}, "
                    f"which the device lacks (its backends: {', '.join(real) or 'none'}); "
                    "use a device whose runtime registers it, or name it a probe "
                    "(--probe / probes=) if it is one of the harness's"
                )


def _cached_copy(data: bytes, source: str, suffix: str) -> Path:
    """The bytes that were read (a program, or the inputs file made of them), in the
    harness's cache under their digest: what is pushed is what was checked, whatever
    happens to the user's file meanwhile."""
    digest = hashlib.sha256(data).hexdigest()
    directory = cache_root() / "programs" / "user"
    path = directory / f"{digest}{suffix}"
    entry = CacheEntry(USER_PROGRAM_KIND, path)
    if not entry.use():
        with entry.building() as intact:
            if not intact:
                with writing(directory, f"keeping a copy of {source}"):
                    partial = directory / f".{digest}.{os.getpid()}.tmp"
                    partial.write_bytes(data)
                    partial.replace(path)
                entry.commit()
    return path
