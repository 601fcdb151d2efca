"""A user's own program checked on a device (``et.check_program``, ``et-harness send
--program``): every method, every load path, every delegate's ``init`` exactly.

The program file is read within :data:`~harness.agent.program_contents.MAX_PROGRAM_BYTES`
and its methods and delegates are read from the program itself
(:mod:`harness.agent.program_contents`); the bytes read are what is pushed, named by
their content, so a device that has them already is not sent them again. Each method
is loaded (and executed once, with inputs the agent builds from the method's metadata)
through each load path the agent announces; the map must reach each delegate as it
would reach a probe: its own entry, exactly (on ``module_both`` as the explicit map,
with a decoy stored map that must never arrive).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.agent.program_contents import ProgramContents, ProgramError, read_program
from harness.check import DeliveryMismatch
from harness.check.option_contracts import OptionWarning, Route
from harness.check.rendering import ignored_line
from harness.codec.mapfile import as_map
from harness.data.messages import LoadPath, Outcome
from harness.data.options import OptionsMap
from harness.data.runtime_error import RuntimeErrorCode, describe_status
from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import CacheEntry
from harness.lifecycle.disk import writing
from harness.probes import refuse_real_probes

USER_PROGRAM_KIND = "user-program"

if TYPE_CHECKING:
    from harness.check import Verdict
    from harness.runner import CaseRunner


@dataclass(frozen=True)
class MethodVerdict:
    """One method of the program loaded through one path, and its verdict."""

    method: str
    path: LoadPath
    verdict: Verdict


@dataclass(frozen=True)
class ProgramCheck:
    """Every method of a program on every load path of one device, and the options of
    the map its backends will ignore (``warnings``: under ``--strict-options`` the map is
    refused before it travels, :class:`OptionsWithoutEffect`)."""

    program: str
    methods: tuple[str, ...]
    results: tuple[MethodVerdict, ...]
    warnings: tuple[OptionWarning, ...] = ()

    @property
    def ok(self) -> bool:
        return all(r.verdict.ok for r in self.results)

    def render(self) -> str:
        """Each method and path's verdict, the backends every load ignored (once), then
        one line for the program (the warnings themselves are Python's,
        :class:`NoEffectWarning`: ``send`` prints them below)."""
        parts = [f"method {r.method!r}, {r.verdict.render(ignored=False)}" for r in self.results]
        ignored = dict.fromkeys(b for r in self.results for b in r.verdict.ignored_backends)
        parts += [ignored_line(ignored)] if ignored else []
        exact = sum(r.verdict.ok for r in self.results)
        methods = f"{len(self.methods)} method{'' if len(self.methods) == 1 else 's'}"
        line = f"program {self.program}: {methods} x load paths = {len(self.results)} loads, "
        line += f"{exact} exact"
        if self.warnings:
            count = len(self.warnings)
            line += f"; {count} option{'' if count == 1 else 's'} without effect (warnings)"
        parts.append(line)
        return "\n".join(parts)

    def raise_for_differences(self) -> None:
        """Raise the first verdict's :class:`DeliveryMismatch` that did not pass (where the
        runtime refused the method, :class:`MethodFailed` says why on its first line)."""
        for result in self.results:
            if result.verdict.report.outcome is Outcome.RUNTIME_ERROR:
                raise MethodFailed(self.program, result)
            result.verdict.raise_for_differences()


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
    push: Callable[[Path], str],
    program: str | os.PathLike[str],
    options: OptionsMap | str | os.PathLike[str],
    *,
    probes: Sequence[str] = (),
    strict: bool | None = None,
    forget: Callable[[str], None] | None = None,
) -> ProgramCheck:
    """Check ``program`` with ``options`` on ``runner``'s device (see the module). The
    map is judged once, as the runner judges every map (:meth:`CaseRunner.heed`, with
    ``strict`` if given): its options the backends will ignore are warnings, or
    :class:`OptionsWithoutEffect` before anything travels. When a load says the program
    is damaged, its copies (the cache's, and the device's through ``forget``) are
    removed at once: the next check sends it again."""
    contents = read_program(program)
    sent = as_map(options)
    ignored = runner.heed(sent, Route.LOAD, probes, strict)
    _check_backends(contents, runner.real_backends, probes)
    cached = _cached_copy(contents)
    remote = push(cached)
    results = []
    with runner.unjudged():  # judged once above, not once per load
        for method in contents.methods:
            unobserved = tuple(d for d in dict.fromkeys(method.delegates) if d not in probes)
            for path in runner.load_paths:
                verdict = runner.load(
                    sent,
                    method.delegates,
                    unobserved=unobserved,
                    path=path,
                    method=method.name,
                    program=remote,
                    probes=probes,
                )
                results.append(MethodVerdict(method.name, path, verdict))
                runner.reset()
    if any(_says_damaged(r.verdict) for r in results):
        CacheEntry(USER_PROGRAM_KIND, cached).discard()
        if forget is not None:
            forget(remote)
    methods = tuple(m.name for m in contents.methods)
    return ProgramCheck(contents.source, methods, tuple(results), ignored)


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


def _cached_copy(contents: ProgramContents) -> Path:
    """The bytes that were read, in the harness's cache under their digest: what is
    pushed is what was checked, whatever happens to the user's file meanwhile."""
    digest = hashlib.sha256(contents.data).hexdigest()
    directory = cache_root() / "programs" / "user"
    path = directory / f"{digest}.pte"
    entry = CacheEntry(USER_PROGRAM_KIND, path)
    if not entry.use():
        with entry.building() as intact:
            if not intact:
                with writing(directory, f"keeping a copy of {contents.source}"):
                    partial = directory / f".{digest}.{os.getpid()}.tmp"
                    partial.write_bytes(contents.data)
                    partial.replace(path)
                entry.commit()
    return path
