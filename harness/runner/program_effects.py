"""What a map's options did to a program's outputs (the effect check of
``et.check_program`` and ``send --program``).

For each method and load path the program is loaded without the map (the baseline) and
with it, each load executed :data:`EXECUTES` times and done :data:`LOADS` times in the
same agent (caches and workspaces outlive a load); then once more through the global
route (``set_option`` with the map, then loads without it) on the ``program`` path, in
an agent restarted afterwards so the global values reach nothing else. Every output of
every execute must equal the baseline's first bit for bit (:mod:`harness.check.output_effects`);
when it does not, the options are narrowed to the smallest set that still changes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.check.output_effects import (
    ElementChange,
    FileObservation,
    Judged,
    OutputEffect,
    first_change,
    tolerance_of,
)
from harness.data.effects import Changes
from harness.data.messages import Action, LoadPath, Outcome, Report, Request
from harness.data.options import BackendOptions, Option, OptionsMap
from harness.data.outputs import TensorOutput, outputs_of
from harness.programs.contents import MethodContents

if TYPE_CHECKING:
    from harness.check import Verdict
    from harness.runner.case_runner import CaseRunner

EXECUTES = 3  # per load: the LOAD's own execute, then EXECUTE twice
LOADS = 2  # in the same agent, one after the other

AT_LOAD = "at load time"
GLOBAL = "through set_option"
_Picked = tuple[tuple[str, Option], ...]  # (backend, option) in map order
_Changes = Callable[[_Picked], "tuple[str, ElementChange] | None"]


@dataclass(frozen=True)
class Run:
    """The outputs of one execute: ``label`` says which (``load 2 execute 3``);
    ``expected`` the agent's comparison with the expected outputs given beside the
    program (``ok``, or where the first differs; None when none were given)."""

    label: str
    outputs: tuple[TensorOutput, ...]
    expected: str | None = None

    @classmethod
    def of(cls, label: str, report: Report) -> Run:
        """The run a LOAD or EXECUTE report describes."""
        expected = report.fact("expected")
        return cls(label, outputs_of(report), expected if isinstance(expected, str) else None)


@dataclass(frozen=True)
class Target:
    """Where the runs go: the pushed program, one method, the probes among its delegates,
    and what each option of the map may change (``option_contracts.judged_effects``)."""

    remote: str
    method: MethodContents
    probes: tuple[str, ...]
    judged: Judged = field(default_factory=dict)

    @property
    def unobserved(self) -> tuple[str, ...]:
        return tuple(d for d in dict.fromkeys(self.method.delegates) if d not in self.probes)


def load_runs(
    runner: CaseRunner,
    target: Target,
    options: OptionsMap,
    path: LoadPath,
    *,
    checked: bool = False,
) -> tuple[Verdict, tuple[Run, ...]]:
    """:data:`LOADS` loads with ``options``, each executed :data:`EXECUTES` times; the
    first load's verdict and every execute's outputs. The agent is reset afterwards.
    Only a ``checked`` run's first verdict goes into the test's records: it is the
    delivery check; the others are runs for their outputs."""
    verdicts: list[Verdict] = []
    runs: list[Run] = []
    for load in range(1, LOADS + 1):
        verdict = runner.load(
            options,
            target.method.delegates,
            unobserved=target.unobserved,
            path=path,
            method=target.method.name,
            program=target.remote,
            probes=target.probes,
            record=checked and not verdicts,
        )
        verdicts.append(verdict)
        if verdict.report.outcome is not Outcome.OK:
            break
        runs.append(Run.of(f"load {load} execute 1", verdict.report))
        for execute in range(2, EXECUTES + 1):
            report = runner.execute()
            if report.outcome is not Outcome.OK:
                break
            runs.append(Run.of(f"load {load} execute {execute}", report))
    runner.reset()
    return verdicts[0], tuple(runs)


def global_runs(runner: CaseRunner, target: Target, options: OptionsMap) -> tuple[Run, ...]:
    """``set_option`` with ``options``, then :func:`load_runs` without a map on the
    ``program`` path; the agent is restarted afterwards (the values set stay otherwise)."""
    runner.prepare([b for b in options.backend_ids if b in target.probes])
    runner.send(Request(Action.SET, options))
    try:
        return load_runs(runner, target, OptionsMap(), LoadPath.PROGRAM)[1]
    finally:
        runner.restart()


def find_change(
    baseline: Sequence[Run], runs: Sequence[Run], tolerance: float = 0.0
) -> tuple[str, ElementChange] | None:
    """The first run whose outputs differ from the baseline's first execute (beyond
    ``tolerance``), and where."""
    if not baseline:
        return None
    for run in runs:
        change = first_change(baseline[0].outputs, run.outputs, tolerance)
        if change is not None:
            return run.label, change
    return None


def effects_of(
    runner: CaseRunner,
    target: Target,
    options: OptionsMap,
    path: LoadPath,
    baseline: Sequence[Run],
    runs: Sequence[Run],
    route: str = AT_LOAD,
) -> list[OutputEffect]:
    """The effect the map's options had on ``runs``, narrowed to the smallest set of
    options that still changes the outputs; none when nothing changed. When the outputs
    vary without options (the baseline's own executes and loads differ) nothing can be
    judged: an effect without options says so."""
    varies = find_change(baseline, baseline[1:]) if route == AT_LOAD else None
    if varies is not None:
        label, change = varies
        return [OutputEffect((), target.method.name, path.label, route, label, change, False)]
    picked: _Picked = tuple((b.backend_id, o) for b in options.backends for o in b.options)
    tolerance = tolerance_of([(b, o.key) for b, o in picked], target.judged)
    found = find_change(baseline, runs, tolerance)
    if found is None:
        return []

    def changes(subset: _Picked) -> tuple[str, ElementChange] | None:
        trial = _map_of(subset)
        if route == GLOBAL:
            return find_change(baseline, global_runs(runner, target, trial), tolerance)
        return find_change(baseline, load_runs(runner, target, trial, path)[1], tolerance)

    smallest, found = _shrink(picked, found, changes)
    label, change = found
    options_named = tuple((b, o.key, o.value) for b, o in smallest)
    judged = all((b, o.key) in target.judged for b, o in smallest)
    effect = OutputEffect(
        options_named, target.method.name, path.label, route, label, change, judged, tolerance
    )
    return [effect]


@dataclass(frozen=True)
class FileWatch:
    """An option of the map whose declared effect is a file at the path its value names."""

    backend: str
    key: str
    file: str


def files_due(options: OptionsMap, judged: Judged) -> tuple[FileWatch, ...]:
    """The options of ``options`` whose ``file`` effect is due (its ``when`` options are
    in the same backend's entry with those values), each naming its file."""
    due = []
    for entry in options.backends:
        given = {option.key: option.value for option in entry.options}
        for option in entry.options:
            effect = judged.get((entry.backend_id, option.key))
            if effect is not None and effect.changes is Changes.FILE and effect.applies(given):
                due.append(FileWatch(entry.backend_id, option.key, str(option.value)))
    return tuple(due)


def unobservable(runner: CaseRunner, watch: FileWatch) -> str:
    """Why ``watch``'s file cannot be looked for before the check's first load; "" if it
    can (the check then owns the file: it removes it before each load and at the end)."""
    files = runner.device_files
    if files is None:
        return "the device has no file system to look in"
    if not watch.file.startswith("/"):
        return "give an absolute path: a relative one is the agent's to resolve"
    if files.file_exists(watch.file):
        return "a file was there before the check: give a path where none is"
    return ""


def clear(runner: CaseRunner, watches: Sequence[tuple[FileWatch, str]]) -> None:
    """Remove the watched files that can be looked for: the check's own (none was there
    before it), so that the next load must write them again and none stays after it."""
    files = runner.device_files
    for watch, why in watches:
        if files is not None and not why:
            files.remove_file(watch.file)


def observe(
    runner: CaseRunner, watches: Sequence[tuple[FileWatch, str]], method: str, path: LoadPath
) -> list[FileObservation]:
    """Whether each watched file is there after a load with the map; ``watches`` pair
    each with why it cannot be looked for ("" if it can)."""
    files = runner.device_files
    return [
        FileObservation(
            watch.backend,
            watch.key,
            watch.file,
            method,
            path.label,
            None if why or files is None else files.file_exists(watch.file),
            why,
        )
        for watch, why in watches
    ]


def _shrink(
    picked: _Picked,
    found: tuple[str, ElementChange],
    changes: _Changes,
) -> tuple[_Picked, tuple[str, ElementChange]]:
    """Each option alone first; if none changes the outputs alone, drop one option at a
    time while the rest still does."""
    if len(picked) <= 1:
        return picked, found
    for single in picked:
        alone = changes((single,))
        if alone is not None:
            return (single,), alone
    kept = picked
    for option in picked:
        rest = tuple(p for p in kept if p != option)
        if rest and (still := changes(rest)) is not None:
            kept, found = rest, still
    return kept, found


def _map_of(picked: _Picked) -> OptionsMap:
    backends: dict[str, list[Option]] = {}
    for backend, option in picked:
        backends.setdefault(backend, []).append(option)
    return OptionsMap(tuple(BackendOptions(b, tuple(o)) for b, o in backends.items()))
