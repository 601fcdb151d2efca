"""The exactness check of a LOAD with several models (wire-format.md, LOAD "models").

Each model is its own program instance with its own map: :func:`check_models` checks
every model's report entries (``ReportEntry.model``) against that model's map alone,
as :func:`~harness.check.check_load` checks one LOAD, and gives one
:class:`~harness.check.Verdict` per model. An option a backend of model B received that
was sent to the same backend in another model's map, and not in B's own, is not an
ordinary wrong value or extra option: it is a :attr:`DifferenceKind.CROSS_MODEL`
misroute naming the model it belongs to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from harness.check import BackendOutcome, Difference, DifferenceKind, Verdict, check_load
from harness.data.messages import Action, Report, Request
from harness.data.options import Option, OptionsMap

# What a value of another model shows up as when only one model's map is looked at.
_LEAK_KINDS = frozenset(
    {
        DifferenceKind.WRONG_VALUE,
        DifferenceKind.WRONG_TYPE,
        DifferenceKind.EXTRA_OPTION,
        DifferenceKind.UNEXPECTED_DELIVERY,
        DifferenceKind.MISROUTED,
    }
)


def check_models(
    request: Request,
    report: Report,
    *,
    unobserved: Collection[str] = (),
    recorded: Collection[str] = (),
) -> tuple[Verdict, ...]:
    """One verdict per model of ``request`` (model 0 first): its entries against its map.

    Entries naming a model the request does not have are unexpected entries of the
    last model's verdict. The report's ``load_path`` fact is model 0's; the other
    models' paths are not reported separately, so only model 0's is compared.
    """
    if request.action is not Action.LOAD:
        raise ValueError(f"check_models checks LOAD requests, not {request.action.name}")
    specs = [(request.delivered, request.delegates, request.path)]
    specs += [(m.delivered, m.delegates, m.path) for m in request.models]
    maps = [sent for sent, _, _ in specs]
    verdicts = []
    for index, (sent, delegates, path) in enumerate(specs):
        facts = (
            report.facts if index == 0 else tuple(f for f in report.facts if f.key != "load_path")
        )
        own = dataclasses.replace(
            report, facts=facts, entries=tuple(e for e in report.entries if e.model == index)
        )
        # ``unobserved`` names real backends of any model; each model's check takes its own.
        own_unobserved = [name for name in unobserved if name in delegates]
        verdict = check_load(
            sent, delegates, own, unobserved=own_unobserved, path=path, recorded=recorded
        )
        verdicts.append(_mark_cross_model(verdict, index, maps))
    strays = tuple(e for e in report.entries if e.model >= len(specs))
    if strays:
        last = verdicts[-1]
        extra = tuple(
            Difference(
                DifferenceKind.UNEXPECTED_ENTRY,
                e.name,
                None,
                None,
                e,
                note=f"the request has no model {e.model}",
            )
            for e in strays
        )
        verdicts[-1] = dataclasses.replace(last, report_differences=last.report_differences + extra)
    return tuple(verdicts)


def _mark_cross_model(verdict: Verdict, index: int, maps: list[OptionsMap]) -> Verdict:
    backends = tuple(_marked(b, index, maps) for b in verdict.backends)
    return dataclasses.replace(verdict, backends=backends)


def _marked(outcome: BackendOutcome, index: int, maps: list[OptionsMap]) -> BackendOutcome:
    def owners(difference: Difference) -> tuple[str, ...]:
        if difference.kind not in _LEAK_KINDS or difference.key is None:
            return ()
        got = Option(difference.key, difference.actual)  # type: ignore[arg-type]
        return tuple(
            f"model {other}"
            for other, sent in enumerate(maps)
            if other != index and _sent_to(sent, outcome.name, got)
        )

    def marked(difference: Difference) -> Difference:
        found = owners(difference)
        if not found:
            return difference
        own = (
            difference.expected
            if difference.kind in (DifferenceKind.WRONG_VALUE, DifferenceKind.WRONG_TYPE)
            else None
        )
        return Difference(
            DifferenceKind.CROSS_MODEL,
            difference.backend,
            difference.key,
            own,
            difference.actual,
            found,
            difference.note,
        )

    differences = tuple(marked(d) for d in outcome.differences)
    if differences == outcome.differences:
        return outcome
    rows = tuple(
        dataclasses.replace(r, difference=marked(r.difference)) if r.difference is not None else r
        for r in outcome.rows
    )
    return dataclasses.replace(outcome, rows=rows, differences=differences)


def _sent_to(sent: OptionsMap, backend: str, option: Option) -> bool:
    entry = sent.for_backend(backend)
    return entry is not None and any(
        o.key == option.key and type(o.value) is type(option.value) and o.value == option.value
        for o in entry.options
    )
