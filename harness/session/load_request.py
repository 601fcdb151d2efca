"""The LOAD request a case sends: its models, their maps, and the stored map's decoy.

A LOAD carries one model or several (:class:`ModelLoad`, :meth:`CaseRunner.load_models`
in :mod:`harness.runner.case_runner`); on ``module_both`` each model has two maps, the explicit
one of ``Module::load_method`` and a stored one given to ``Module::load`` before it
(:func:`decoy` by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.data.messages import LoadPath, LoadSpec, Request
from harness.data.options import MAX_LOAD_BACKENDS, BackendOptions, Option, OptionsMap
from harness.session.agent_requests import RunnerError

__all__ = ["STORED_DECOY", "ModelLoad", "decoy", "load_request"]

# module_both's default stored map gives each backend this option: the explicit map
# replaces the stored one wholly, so no delegate may ever receive it.
STORED_DECOY = Option("etb.stored_map_must_not_arrive", True)


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
                self.stored if self.stored is not None else decoy(self.program_ids, self.options)
            )
            return LoadSpec(program, self.program_ids, first, self.path, self.method, self.options)
        return LoadSpec(program, self.program_ids, self.options, self.path, self.method)


def decoy(delegates: Sequence[str], options: OptionsMap) -> OptionsMap:
    """A stored map with :data:`STORED_DECOY` for each backend a load may deliver to."""
    ids = list(dict.fromkeys([*options.backend_ids, *delegates]))[:MAX_LOAD_BACKENDS]
    return OptionsMap(tuple(BackendOptions(b, (STORED_DECOY,)) for b in ids))


def load_request(
    first: LoadSpec,
    *,
    keep: bool = False,
    models: tuple[LoadSpec, ...] = (),
    concurrent: bool = False,
) -> Request:
    """The LOAD request of ``first`` (and further ``models``)."""
    return Request.load(
        first.program,
        first.delegates,
        first.options,
        path=first.path,
        method_options=first.method_options,
        keep=keep,
        method=first.method,
        models=models,
        concurrent=concurrent,
    )
