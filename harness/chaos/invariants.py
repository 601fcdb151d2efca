"""What a chaos run must hold at its end, checked from what it left: its results files,
pytest's JUnit files, the ownership records of its harness processes and its faults.

- **no wrong verdict**: every test that did not pass (failed, error, infra) ended with an
  infrastructure error that an injected fault on its device explains (one at most
  :data:`BEFORE_S` seconds before the test started and before it ended; any earlier one
  of the round for a test not started on a quarantined device), retried or quarantined
  (also the test whose device's bring-up failed with it, when that quarantined the
  device); or with the run's time being up (also when it was up during its device's
  first health check, which quarantines the device). A ``failed`` or ``error`` outcome is
  always wrong.
- **no lost result**: every test pytest finished (its JUnit file) has its record.
- **nothing left running**: no process any of the run's harness processes started (their
  ownership records, :func:`harness.lifecycle.reap.still_running`), no namespace of theirs.
- **same seed, same faults**: the faults injected are the seed's schedule, in order, up
  to the end of the last round; those planned after it are *not reached* (no round ran
  then), listed and counted apart.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.chaos.schedule import Fault
from harness.lifecycle.reap import OwnerRecord, still_running
from harness.results.directory import ResultsFileError, read_results
from harness.results.infra import one_line
from harness.results.records import CaseResult

BEFORE_S = 120.0  # how long before a test a fault on its device may explain its failure
AFTER_S = 5.0  # a fault's time and a record's end are measured by two processes
PASSING = ("passed", "skipped", "xfailed", "xpassed")
_SHOWN = 10  # broken lines shown per invariant


@dataclass(frozen=True)
class Injection:
    """A fault as injected: when (seconds since the epoch), and what it hit (nothing:
    missed, its target was not up)."""

    fault: Fault
    at: float
    hit: tuple[str, ...]


@dataclass(frozen=True)
class Round:
    """One pytest run of the chaos run: its results folder, JUnit file and times."""

    results: Path
    junit: Path
    started: float
    ended: float


@dataclass(frozen=True)
class Invariant:
    """One invariant: held or not, a summary, the lines that broke it and lines said of
    it that break nothing (faults not reached)."""

    name: str
    held: bool
    summary: str
    broken: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        state = "held  " if self.held else "BROKEN"
        lines = [f"  {state} {self.name}: {self.summary}"]
        for shown in (self.broken, self.notes):
            lines += [f"    {line}" for line in shown[:_SHOWN]]
            more = len(shown) - _SHOWN
            lines += [f"    ... and {more} more"] if more > 0 else []
        return lines


def _records(round_: Round) -> tuple[list[CaseResult], str | None]:
    path = round_.results / "results.jsonl"
    if not path.is_file():
        return [], f"{path}: no results file"
    try:
        return read_results(path), None
    except ResultsFileError as exc:
        return [], str(exc)


def _explained(record: CaseResult, round_: Round, faults: Sequence[Injection]) -> bool:
    """Whether an injected fault on the record's device explains its infrastructure error."""
    ended = record.started + record.duration + AFTER_S
    quarantined = record.infra is not None and record.infra.type.endswith("Quarantined")
    earliest = round_.started if quarantined else record.started - BEFORE_S
    return any(
        i.hit and i.fault.target == record.device and earliest <= i.at <= ended for i in faults
    )


def _time_was_up(record: CaseResult) -> bool:
    """Whether the round's time was up (``--run-timeout``): the test was stopped or not
    started, or its device's first health check was (the device is then quarantined)."""
    infra = record.infra
    if infra is None:
        return False
    quarantined_late = infra.type.endswith("Quarantined") and "RunTimeExpired: " in infra.message
    return infra.type == "RunTimeExpired" or quarantined_late


def _quarantines(records: Sequence[CaseResult]) -> set[tuple[str | None, str]]:
    """(device, message) of each quarantined device's tests not started."""
    return {
        (r.device, r.infra.message)
        for r in records
        if r.infra is not None and r.infra.type.endswith("Quarantined")
    }


def _quarantined_it(record: CaseResult, quarantines: set[tuple[str | None, str]]) -> bool:
    """Whether the record's infrastructure error is its device's failed bring-up, which
    quarantined the device (its tests not started say so, naming that error)."""
    infra = record.infra
    if infra is None:
        return False
    said = f"bring-up failed: {infra.type}: {one_line(infra.message)}"
    return any(device == record.device and said in message for device, message in quarantines)


def _wrong(
    record: CaseResult,
    round_: Round,
    faults: Sequence[Injection],
    quarantines: set[tuple[str | None, str]],
) -> str | None:
    """Why ``record`` is a wrong verdict, or None (``quarantines``: :func:`_quarantines`
    of its round)."""
    if record.outcome in PASSING:
        return None
    infra = record.infra
    if record.outcome != "infra" or infra is None:
        error = (record.error_lines or [""])[0]
        return f"{record.nodeid}: {record.outcome} {error}"[:300]
    if _time_was_up(record):
        return None
    what = f"{record.nodeid}: infra {infra.type}: {infra.message}"[:300]
    if not _explained(record, round_, faults):
        return f"{what} (no fault on {record.device} explains it)"
    quarantined = infra.type.endswith("Quarantined") or _quarantined_it(record, quarantines)
    if not record.failed_tries and not quarantined:
        return f"{what} (neither retried nor quarantined)"
    return None


def no_wrong_verdict(rounds: Sequence[Round], faults: Sequence[Injection]) -> Invariant:
    broken: list[str] = []
    counts: Counter[str] = Counter()
    for round_ in rounds:
        records, trouble = _records(round_)
        broken += [trouble] if trouble else []
        quarantines = _quarantines(records)
        for record in records:
            counts[record.outcome] += 1
            counts["retried"] += bool(record.failed_tries) and record.outcome == "passed"
            counts["time up"] += _time_was_up(record)
            why = _wrong(record, round_, faults, quarantines)
            broken += [why] if why else []
    summary = (
        f"{sum(counts[o] for o in PASSING)} passed or skipped "
        f"({counts['retried']} after a retry), {counts['infra']} infra "
        f"({counts['time up']} as a round's time was up, {counts['infra'] - counts['time up']} "
        "after a fault), "
        f"{counts['failed'] + counts['error']} failed"
    )
    return Invariant("no wrong verdict", not broken, summary, tuple(broken))


def _junit_keys(path: Path) -> tuple[set[tuple[str, str]], str | None]:
    try:
        tree = ElementTree.parse(path)
    except (OSError, ElementTree.ParseError) as exc:
        return set(), f"{path}: no JUnit file of the round ({exc})"
    cases = tree.getroot().iter("testcase")
    return {(case.get("classname", ""), case.get("name", "")) for case in cases}, None


def junit_key(nodeid: str) -> tuple[str, str]:
    """``suites/test_x.py::Class::test_y[a]`` as pytest's JUnit names it:
    (``suites.test_x.Class``, ``test_y[a]``)."""
    path, *names = nodeid.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *names[:-1]]), names[-1] if names else ""


def no_lost_result(rounds: Sequence[Round]) -> Invariant:
    broken: list[str] = []
    finished = recorded = 0
    for round_ in rounds:
        keys, trouble = _junit_keys(round_.junit)
        records, records_trouble = _records(round_)
        broken += [t for t in (trouble, records_trouble) if t]
        have = {junit_key(record.nodeid) for record in records}
        finished, recorded = finished + len(keys), recorded + len(keys & have)
        broken += [f"{cls}::{name}: finished, not recorded" for cls, name in sorted(keys - have)]
    summary = f"{finished} tests finished, {recorded} of them recorded"
    return Invariant("no lost result", not broken, summary, tuple(broken))


def nothing_left_running(owners: Sequence[OwnerRecord], notes: Sequence[str]) -> Invariant:
    """``notes``: what the run itself found left (a round that overran its time)."""
    broken = list(notes)
    for record in owners:
        for pid in sorted(still_running(record)):
            broken.append(f"process {pid} of {record.owner}: {_command(pid)}")
        broken += [
            f"network namespace {n} of {record.owner}"
            for n in record.netns
            if Path("/run/netns", n).exists()
        ]
    summary = f"{len(owners)} harness processes' ownership records checked"
    return Invariant("nothing left running", not broken, summary, tuple(broken))


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "(gone meanwhile)"


def same_faults(
    planned: Sequence[Fault], injected: Sequence[Injection], rounds: Sequence[Round]
) -> Invariant:
    """The faults injected are the first of ``planned``, in order, and every one left is
    planned after the last round ended (counted from the first round's start): not
    reached, as no round ran then."""
    done = [i.fault for i in injected]
    end = rounds[-1].ended - rounds[0].started if rounds else 0.0
    left = list(planned[len(done) :])
    broken = (
        []
        if done == list(planned[: len(done)])
        else ["the faults injected are not the seed's schedule"]
    )
    if not broken:
        broken = [f"not injected: {f.line().strip()}" for f in left if f.at_s <= end]
    unreached = [f"not reached: {f.line().strip()}" for f in left if f.at_s > end]
    summary = f"{len(done)} of {len(planned)} planned faults injected, in the seed's order"
    if unreached:
        summary += f"; {len(unreached)} not reached (after the last round ended, {end:.2f} s in)"
    return Invariant("same seed, same faults", not broken, summary, tuple(broken), tuple(unreached))


def fault_counts(injected: Sequence[Injection]) -> dict[str, tuple[int, int]]:
    """Per kind: (injected, missed: its target was not up)."""
    counts: dict[str, tuple[int, int]] = {}
    for i in injected:
        hit, missed = counts.get(i.fault.kind, (0, 0))
        counts[i.fault.kind] = (hit + bool(i.hit), missed + (not i.hit))
    return dict(sorted(counts.items()))
