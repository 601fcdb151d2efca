"""Plain-text tables of a run's results for the terminal.

- :func:`outcome_table`: devices x outcomes (passed, failed, infra, ...), with
  the tests that passed only after a retry;
- :func:`quarantined_devices`: each quarantined device and why;
- :func:`emulator_restarts`: each emulated device the run restarted, and why;
- :func:`infrastructure_lines`: the infrastructure errors, not-started tests counted;
- :func:`backend_table`: per backend, the option checks that were exact or wrong, in
  total and per route (each load path, set, get), and how many verdicts with
  differences the tests expected (:func:`verdicts_line`); :func:`real_backends`, the
  devices' own backends (the rest are probes);
- :func:`device_runtime`: what ran on a device, as its HELLO named it;
- :func:`across_runtimes`: where the runtimes of a run across runtimes differ.

A run across runtimes (``--runtime``) has each device once per runtime in these tables,
``host@1.5.0`` (:func:`where`).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence

from harness.check import show_name
from harness.results.infra import one_line
from harness.results.records import OUTCOMES, CaseResult

NO_DEVICE = "(no device)"
_QUARANTINED = "DeviceQuarantined"
# Infrastructure errors in setup that mean the test was never started, and why.
_NOT_STARTED = {
    _QUARANTINED: "the device is quarantined",
    "RunTimeExpired": "the run's time was up",
}
# Outcomes whose verdicts' differences were what the test wanted.
_EXPECTING = ("passed", "xfailed")
_SHOWN_BACKENDS = 12
_NAME_WIDTH = 32


def where(result: CaseResult) -> str:
    """The device a result ran on, with its runtime in a run across runtimes (``host``,
    ``host@1.5.0``), or :data:`NO_DEVICE`."""
    return result.device_runtime or NO_DEVICE


def devices_in_order(results: Iterable[CaseResult]) -> list[str]:
    """Device names (:func:`where`) in the order they first appear (tests without a device
    last)."""
    seen = dict.fromkeys(where(r) for r in results)
    names = [n for n in seen if n != NO_DEVICE]
    return names + ([NO_DEVICE] if NO_DEVICE in seen else [])


def device_runtime(results: Iterable[CaseResult], device: str, fact: str = "runtime") -> str | None:
    """The ``runtime`` fact the device's agent announced (e.g. what is real and what is a
    stand-in on an MCU), or None if no result of it carries one; ``fact`` another of
    the runtime's facts (``from_source``, ``lacks``)."""
    for result in results:
        if where(result) == device and result.facts.get(fact):
            return result.facts[fact]
    return None


def outcome_counts(results: Iterable[CaseResult]) -> dict[str, collections.Counter]:
    """Per device, how many tests ended in each outcome (and ``retried``: passed after a retry)."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for result in results:
        row = counts[where(result)]
        row[result.outcome] += 1
        if result.failed_tries and result.outcome == "passed":
            row["retried"] += 1
    return counts


def outcome_table(results: Sequence[CaseResult]) -> list[str]:
    """``device  passed  failed  infra ...`` with one row per device and a total row."""
    counts = outcome_counts(results)
    columns = [
        o
        for o in OUTCOMES
        if o in ("passed", "failed", "infra") or any(c[o] for c in counts.values())
    ]
    if any(c["retried"] for c in counts.values()):
        columns.append("retried")
    rows = [(name, counts[name]) for name in devices_in_order(results)]
    total = sum((c for _, c in rows), collections.Counter())
    width = max([len("device"), len("total"), *(len(name) for name, _ in rows)])
    lines = ["  ".join([f"{'device':<{width}}", *(f"{c:>7}" for c in columns)])]
    for name, row in [*rows, ("total", total)]:
        lines.append("  ".join([f"{name:<{width}}", *(f"{row[c]:>7}" for c in columns)]))
    return lines


def emulator_restarts(results: Iterable[CaseResult]) -> dict[str, list[str]]:
    """Device -> why its emulator was restarted, in order (each with the test it ended)."""
    found: dict[str, list[str]] = {}
    for result in results:
        for reason in result.emulator_restarts:
            found.setdefault(where(result), []).append(f"{result.name}: {one_line(reason)}")
    return found


def quarantined_devices(results: Iterable[CaseResult]) -> dict[str, str]:
    """Device -> the message of the first test that ended because it was quarantined."""
    found: dict[str, str] = {}
    for result in results:
        if result.infra and result.infra.type == _QUARANTINED and result.device:
            found.setdefault(where(result), one_line(result.infra.message, 500))  # its cause whole
    return found


ROUTES = ("program", "module", "module_method", "module_both", "set", "get")


def real_backends(results: Iterable[CaseResult]) -> set[str]:
    """The backends the devices of ``results`` announce as their own (the registered
    backends of their HELLO that are not probes, the ``real_backends`` fact); every other
    name a verdict checked is a probe, or a name the device lacks."""
    return {n for r in results for n in r.facts.get("real_backends", "").split(",") if n}


def backend_counts(results: Iterable[CaseResult]) -> dict[str, dict[str, collections.Counter]]:
    """Device -> backend -> Counter(ok=..., wrong=..., (route, ok)=..., (route, wrong)=...)
    over every verdict; a route is a load path, ``set`` or ``get``."""
    counts: dict[str, dict[str, collections.Counter]] = collections.defaultdict(
        lambda: collections.defaultdict(collections.Counter)
    )
    for result in results:
        for verdict in result.verdicts:
            for backend, ok in verdict.backends:
                row = counts[where(result)][backend]
                row["ok" if ok else "wrong"] += 1
                row[(verdict.route, "ok" if ok else "wrong")] += 1
    return counts


def routes_of(results: Iterable[CaseResult]) -> list[str]:
    """The routes the verdicts of ``results`` used, known ones in :data:`ROUTES` order."""
    used = {v.route for r in results for v in r.verdicts}
    return [r for r in ROUTES if r in used] + sorted(used - set(ROUTES))


def _route_cell(counter: collections.Counter, route: str) -> str:
    ok, wrong = counter[(route, "ok")], counter[(route, "wrong")]
    return f"{ok}/{ok + wrong}" if ok + wrong else "-"


def _clip(name: str) -> str:
    return name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 1] + "…"


def backend_table(results: Sequence[CaseResult], device: str) -> list[str]:
    """The per-backend delivery table of ``device`` (the busiest backends first): checks,
    exact, wrong, then exact/checks per route (load path x backend, set, get)."""
    per_backend = backend_counts(results).get(device, {})
    mine = [r for r in results if where(r) == device]
    verdicts = [v for r in mine for v in r.verdicts]
    if not verdicts:
        return []
    routes = routes_of(mine)
    # Wrong deliveries first, then the busiest backends.
    rows = sorted(
        per_backend.items(),
        key=lambda item: (-item[1]["wrong"], -(item[1]["ok"] + item[1]["wrong"]), item[0]),
    )
    shown = rows[:_SHOWN_BACKENDS]
    names = [_clip(show_name(name)) for name, _ in shown]
    width = max([len("backend"), *(len(name) for name in names)])
    widths = [max(len(route), 5) for route in routes]
    head = "".join(f"  {route:>{w}}" for route, w in zip(routes, widths, strict=True))
    lines = [f"{'backend':<{width}}  checks  exact  wrong{head}"]
    for name, (_, c) in zip(names, shown, strict=True):
        cells = "".join(
            f"  {_route_cell(c, route):>{w}}" for route, w in zip(routes, widths, strict=True)
        )
        lines.append(
            f"{name:<{width}}  {c['ok'] + c['wrong']:>6}  {c['ok']:>5}  {c['wrong']:>5}{cells}"
        )
    if len(rows) > len(shown):
        rest = rows[len(shown) :]
        lines.append(
            f"... and {len(rest)} more backends: "
            f"{sum(c['ok'] + c['wrong'] for _, c in rest)} checks, "
            f"{sum(c['wrong'] for _, c in rest)} wrong"
        )
    lines.append(verdicts_line(mine))
    return lines


def verdicts_line(results: Sequence[CaseResult]) -> str:
    """``21 verdicts, 18 exact, 3 with differences (3 expected by tests that passed or
    xfailed)``: the verdicts of ``results`` (one device's)."""
    verdicts = [v for r in results for v in r.verdicts]
    wrong = sum(1 for v in verdicts if not v.ok)
    # A test that checks a refusal, or a known runtime bug (xfail), passes on differences.
    expected = sum(1 for r in results if r.outcome in _EXPECTING for v in r.verdicts if not v.ok)
    note = f" ({expected} expected by tests that passed or xfailed)" if expected else ""
    return (
        f"{len(verdicts)} verdicts, {len(verdicts) - wrong} exact, {wrong} with differences{note}"
    )


def infrastructure_lines(results: Sequence[CaseResult]) -> list[str]:
    """One line per infrastructure error; tests that were not started are counted per cause."""
    lines: list[str] = []
    not_started: collections.Counter[tuple[str, str]] = collections.Counter()
    for result in results:
        infra = result.infra
        if infra is None:
            continue
        if infra.phase == "setup" and infra.type in _NOT_STARTED:
            not_started[(where(result), infra.type)] += 1
            continue
        lines.append(
            f"INFRA {result.nodeid} ({infra.phase}): {infra.type}: {one_line(infra.message)}"
        )
    for (device, kind), count in not_started.items():
        lines.append(f"INFRA {count} test(s) on {device} not started: {_NOT_STARTED[kind]}")
    return lines


def runtimes_in_order(results: Iterable[CaseResult]) -> list[str]:
    """The runtime labels of a run across runtimes, in the order they first appear."""
    return [label for label in dict.fromkeys(r.runtime_label for r in results) if label]


def _signature(result: CaseResult) -> tuple[str, tuple[str, ...]]:
    return result.outcome, tuple(d for v in result.verdicts for d in v.differences)


def across_runtimes(
    results: Iterable[CaseResult],
) -> tuple[list[str], list[tuple[str, str, dict[str, CaseResult]]], int]:
    """Where the runtimes of a run across runtimes differ: (the runtimes in order, each
    check on a device whose outcome or differences are not the same on every runtime as
    ``(check, device, {runtime: result})``, how many checks agree on all of them)."""
    results = list(results)
    labels = runtimes_in_order(results)
    by_check: dict[tuple[str, str], dict[str, CaseResult]] = {}
    for result in results:
        if result.runtime_label:
            key = (result.check, result.device or NO_DEVICE)
            by_check.setdefault(key, {})[result.runtime_label] = result
    differing, agreeing = [], 0
    for (check, device), on in by_check.items():
        if len(on) == len(labels) and len({_signature(r) for r in on.values()}) == 1:
            agreeing += 1
        else:
            differing.append((check, device, on))
    return labels, differing, agreeing


def across_runtimes_lines(results: Sequence[CaseResult]) -> list[str]:
    """The checks that are not the same on every runtime, one line each (none for a run
    on one runtime)."""
    labels, differing, agreeing = across_runtimes(results)
    if len(labels) < 2:
        return []
    lines = [f"{len(differing)} check(s) differ on {', '.join(labels)} ({agreeing} the same)"]
    for check, device, on in differing:
        outcomes = ", ".join(
            f"{label} {on[label].outcome if label in on else 'not run'}" for label in labels
        )
        lines.append(f"{check} on {device}: {outcomes}")
    return lines
