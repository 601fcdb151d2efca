"""Per board: the lab places a run's tests ran on, and how each fared.

A pool profile is a device class; its places are the boards. The merged report of a
night of pool jobs answers "which board is unwell" from the ``place`` and ``exporter``
facts every lab result carries: per place, its tests by outcome, the devices (profiles)
that used it and the exporters that served it. A lab device's results without a place
(tests that never reached one: no place came free, or the run ended first) are counted
on their own row, ``(no place)``, so that no infrastructure error goes uncounted.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.results.html_style import SHOWN, esc, worst
from harness.results.records import CaseResult
from harness.results.summary import where

NO_PLACE = "(no place)"


@dataclass
class Board:
    """One place's tests: outcomes, devices and exporters seen."""

    name: str
    outcomes: collections.Counter = field(default_factory=collections.Counter)
    devices: dict[str, None] = field(default_factory=dict)
    exporters: dict[str, None] = field(default_factory=dict)


def boards(results: Sequence[CaseResult]) -> list[Board]:
    """The places of ``results`` by name, then :data:`NO_PLACE` for the lab devices' tests
    that carry none; empty when no test ran in a lab."""
    lab_devices = {where(r) for r in results if r.facts.get("place")}
    found: dict[str, Board] = {}
    for result in results:
        place = result.facts.get("place") or (NO_PLACE if where(result) in lab_devices else "")
        if not place:
            continue
        board = found.setdefault(place, Board(place))
        board.outcomes[result.outcome] += 1
        board.devices[where(result)] = None
        for exporter in filter(None, result.facts.get("exporter", "").split(",")):
            board.exporters[exporter] = None
    named = sorted(name for name in found if name != NO_PLACE)
    return [found[name] for name in [*named, *([NO_PLACE] if NO_PLACE in found else [])]]


def board_lines(results: Sequence[CaseResult]) -> list[str]:
    """``board  passed  failed  infra  devices`` for the terminal; [] without lab places."""
    rows = boards(results)
    if not rows:
        return []
    width = max(len("board"), *(len(b.name) for b in rows))
    lines = [f"{'board':<{width}}  {'passed':>7}  {'failed':>7}  {'infra':>7}  devices"]
    for b in rows:
        c = b.outcomes
        lines.append(
            f"{b.name:<{width}}  {c['passed']:>7}  {c['failed'] + c['error']:>7}  "
            f"{c['infra']:>7}  {', '.join(b.devices)}"
        )
    return lines


def board_section(results: Sequence[CaseResult]) -> str:
    """The report's "Boards" table; "" without lab places."""
    rows = boards(results)
    if not rows:
        return ""
    body = "".join(
        f'<tr><th class="{worst(b.outcomes)}">{esc(b.name)}</th>'
        f"<td>{esc(', '.join(b.exporters))}</td><td>{esc(', '.join(b.devices))}</td>"
        + "".join(f'<td class="num">{b.outcomes[o]}</td>' for o in SHOWN)
        + "</tr>"
        for b in rows
    )
    head = "".join(f"<th>{o}</th>" for o in SHOWN)
    return (
        '<h2 id="boards">Boards: the lab places the tests ran on</h2>'
        f"<table><tr><th>place</th><th>exporter</th><th>devices</th>{head}</tr>{body}</table>"
    )
