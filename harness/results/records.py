"""One result per test, as the results file stores it, and how it is built from reports.

Workers attach what only they know (device, HELLO facts, verdicts, infrastructure
errors, failed tries, crash artifacts) to each :class:`pytest.TestReport` as a
plain dict under :data:`FARM_ATTR`, which xdist carries to the controller; there
:class:`ResultAssembler` turns a test's setup, call and teardown reports into
one :class:`CaseResult`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pytest

from harness.check import Verdict
from harness.check.option_outcomes import OptionOutcome
from harness.data.outputs import OutputsUnreadable, outputs_of
from harness.untrusted import json_fields as fields
from harness.untrusted.reading import brief

FARM_ATTR = "et_farm"  # the report attribute holding the worker's additions

OUTCOMES = ("passed", "failed", "infra", "error", "skipped", "xfailed", "xpassed")


@dataclass(frozen=True)
class VerdictRecord:
    """A verdict as stored: its summary, differences and (if any) the rendered diff."""

    action: str
    ok: bool
    summary: str
    differences: tuple[str, ...] = ()
    backends: tuple[tuple[str, bool], ...] = ()  # (backend, delivered exactly)
    render: str = ""  # Verdict.render(), kept when there are differences
    path: str = ""  # a LOAD's load path (program, module, ...); "" for SET and GET
    outputs: tuple[str, ...] = ()  # a LOAD's outputs, one line each (TensorOutput.render)

    @property
    def route(self) -> str:
        """How the options travelled: the load path of a LOAD, else the action (set, get)."""
        return self.path or self.action

    @classmethod
    def of(cls, verdict: Verdict) -> VerdictRecord:
        return cls(
            action=verdict.action.name.lower(),
            ok=verdict.ok,
            summary=verdict.summary(),
            differences=tuple(d.describe() for d in verdict.differences),
            backends=tuple((b.name, b.ok) for b in verdict.backends),
            render="" if verdict.ok else verdict.render(),
            path=verdict.path.label if verdict.path is not None else "",
            outputs=_outputs(verdict),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerdictRecord:
        """A stored verdict, each field checked (a results file may come from elsewhere)."""
        return cls(
            action=fields.text(data, "action"),
            ok=fields.flag(data, "ok"),
            summary=fields.text(data, "summary"),
            differences=fields.texts(data, "differences"),
            backends=fields.pairs(data, "backends", bool),
            render=fields.text(data, "render", ""),
            path=fields.text(data, "path", ""),
            outputs=fields.texts(data, "outputs"),
        )


def _outputs(verdict: Verdict) -> tuple[str, ...]:
    """The outputs a verdict's report describes, one line each (or why they cannot be read)."""
    try:
        return tuple(output.render() for output in outputs_of(verdict.report))
    except OutputsUnreadable as exc:
        return (f"outputs unreadable: {exc}",)


@dataclass(frozen=True)
class OptionRecord:
    """What one option did in a program check, as stored (an :class:`OptionOutcome`)."""

    backend: str
    key: str
    effect: str  # what it may change; "" if unjudged
    delivered: bool | None
    unchanged: bool | None
    observed: bool | None

    @classmethod
    def of(cls, outcome: OptionOutcome) -> OptionRecord:
        return cls(**dataclasses.asdict(outcome))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OptionRecord:
        """A stored option's outcome, each field checked."""
        return cls(
            backend=fields.text(data, "backend"),
            key=fields.text(data, "key"),
            effect=fields.text(data, "effect", ""),
            delivered=fields.optional_flag(data, "delivered"),
            unchanged=fields.optional_flag(data, "unchanged"),
            observed=fields.optional_flag(data, "observed"),
        )


@dataclass(frozen=True)
class InfraRecord:
    """The infrastructure error a test ended with."""

    type: str
    message: str
    phase: str  # setup, call or teardown


@dataclass(frozen=True)
class CaseResult:
    """One test on one device (or on none), as one line of ``results.jsonl``."""

    nodeid: str
    device: str | None
    outcome: str  # one of OUTCOMES
    duration: float
    started: float  # seconds since the epoch
    run: str = ""  # the run (results directory name) it came from
    facts: Mapping[str, str] = field(default_factory=dict)  # abi, runtime, agent_version
    verdicts: tuple[VerdictRecord, ...] = ()
    infra: InfraRecord | None = None
    failed_tries: tuple[str, ...] = ()  # infrastructure errors of tries before the last
    longrepr: str = ""
    sections: tuple[tuple[str, str], ...] = ()  # (title, text): agent stderr, captured output
    artifacts: tuple[str, ...] = ()  # paths relative to the results directory
    # why the device's emulator was restarted during this test (a failed health check)
    emulator_restarts: tuple[str, ...] = ()
    runtime_label: str = ""  # the runtime it ran (--runtime; harness.runtime.choice), or ""
    options: tuple[OptionRecord, ...] = ()  # what each option did in its program checks

    @property
    def error_lines(self) -> list[str]:
        """pytest's ``E`` lines of the failure text, without the ``E``."""
        return [line[1:].strip() for line in self.longrepr.splitlines() if line[:2] == "E "]

    @property
    def device_runtime(self) -> str:
        """``host``, or ``host@1.5.0`` for a run across runtimes: where and on what it ran."""
        device = self.device or ""
        return f"{device}@{self.runtime_label}" if self.runtime_label else device

    @property
    def check(self) -> str:
        """The test id without its runtime (``test_x[host-1.5.0-2]`` -> ``test_x[host-2]``):
        the same check on another runtime has the same one (the runtime's part follows the
        device's in the parameters)."""
        if not self.runtime_label:
            return self.nodeid
        device = self.device or ""
        return self.nodeid.replace(f"[{device}-{self.runtime_label}", f"[{device}", 1)

    @property
    def suite(self) -> str:
        """The test module, e.g. ``suites/test_dispatch.py``."""
        return self.nodeid.split("::", 1)[0]

    @property
    def name(self) -> str:
        """The test's name with its parameters, e.g. ``test_x[host-2-backends]``."""
        return self.nodeid.rsplit("::", 1)[-1]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> CaseResult:
        """One line of ``results.jsonl``; a field of the wrong type is a ValueError naming it."""
        data = fields.load_object(line, "the line")
        outcome = fields.text(data, "outcome")
        if outcome not in OUTCOMES:
            raise fields.JsonFieldError(f"'outcome' must be one of {', '.join(OUTCOMES)}")
        infra = data.get("infra")
        return cls(
            nodeid=fields.text(data, "nodeid"),
            device=fields.optional_text(data, "device"),
            outcome=outcome,
            duration=fields.number(data, "duration", 0.0),
            started=fields.number(data, "started", 0.0),
            run=fields.text(data, "run", ""),
            facts=fields.text_map(data, "facts"),
            verdicts=tuple(VerdictRecord.from_dict(v) for v in fields.objects(data, "verdicts")),
            infra=None if not infra else _infra(fields.json_object(infra, "'infra'")),
            failed_tries=fields.texts(data, "failed_tries"),
            longrepr=fields.text(data, "longrepr", ""),
            sections=fields.pairs(data, "sections", str),
            artifacts=_relative_paths(fields.texts(data, "artifacts")),
            emulator_restarts=fields.texts(data, "emulator_restarts"),
            runtime_label=fields.text(data, "runtime_label", ""),
            options=tuple(OptionRecord.from_dict(o) for o in fields.objects(data, "options")),
        )


def _relative_paths(paths: tuple[str, ...]) -> tuple[str, ...]:
    """Artifacts are linked from the report: a path relative to it, never a URL."""
    for path in paths:
        if path.startswith("/") or ":" in path.split("/", 1)[0]:
            raise fields.JsonFieldError(
                f"'artifacts' holds {brief(path)}, not a path relative to the results directory"
            )
    return paths


def _infra(data: Mapping[str, Any]) -> InfraRecord:
    return InfraRecord(
        fields.text(data, "type"), fields.text(data, "message"), fields.text(data, "phase")
    )


def farm_payload(report: pytest.TestReport) -> dict[str, Any]:
    """What the worker attached to ``report`` (empty if nothing)."""
    return getattr(report, FARM_ATTR, None) or {}


def is_infrastructure_report(report: pytest.TestReport) -> bool:
    """True for a failed report whose error was an infrastructure error."""
    return report.failed and "infra" in farm_payload(report)


class ResultAssembler:
    """Collects each test's reports and returns its :class:`CaseResult` once complete."""

    def __init__(self, run: str) -> None:
        self.run = run
        self._pending: dict[str, list[pytest.TestReport]] = {}

    def add(self, report: pytest.TestReport) -> CaseResult | None:
        """Take one report; after the test's last report, return its result.

        The last is the teardown report, or xdist's report for a test whose worker
        crashed (phase ``???``).
        """
        reports = self._pending.setdefault(report.nodeid, [])
        reports.append(report)
        if report.when in ("setup", "call"):
            return None
        del self._pending[report.nodeid]
        return self._assemble(reports)

    def _assemble(self, reports: list[pytest.TestReport]) -> CaseResult:
        merged: dict[str, Any] = {}
        for report in reports:
            merged.update(farm_payload(report))
        device = merged.get("device")
        failed = [r for r in reports if r.failed]
        infra = next((r for r in failed if "infra" in farm_payload(r)), None)
        return CaseResult(
            nodeid=reports[0].nodeid,
            device=device,
            outcome=_outcome(reports),
            duration=round(sum(r.duration for r in reports), 6),
            started=getattr(reports[0], "start", 0.0),
            run=self.run,
            facts=merged.get("facts", {}),
            verdicts=tuple(VerdictRecord.from_dict(v) for v in merged.get("verdicts", ())),
            infra=InfraRecord(**farm_payload(infra)["infra"]) if infra else None,
            failed_tries=tuple(merged.get("failed_tries", ())),
            longrepr=_longrepr(reports),
            sections=tuple((title, text) for r in failed for title, text in r.sections),
            artifacts=tuple(merged.get("artifacts", ())),
            emulator_restarts=tuple(merged.get("emulator_restarts", ())),
            runtime_label=merged.get("runtime_label", ""),
            options=tuple(OptionRecord.from_dict(o) for o in merged.get("options", ())),
        )


def _outcome(reports: list[pytest.TestReport]) -> str:
    if any(is_infrastructure_report(r) for r in reports):
        return "infra"
    by_phase = {r.when: r for r in reports}
    setup, call = by_phase.get("setup"), by_phase.get("call")
    if setup is not None and setup.failed:
        return "error"
    if setup is not None and setup.skipped:
        return "xfailed" if hasattr(setup, "wasxfail") else "skipped"
    if call is not None:
        if hasattr(call, "wasxfail"):
            return "xfailed" if call.skipped else "xpassed"
        if call.outcome != "passed":
            return call.outcome
    if any(r.failed for r in reports):
        return "error"
    return "passed"


def _longrepr(reports: list[pytest.TestReport]) -> str:
    texts = []
    for report in reports:
        if report.skipped and isinstance(report.longrepr, tuple):
            texts.append(str(report.longrepr[2]))
        elif report.failed:
            header = f"[{report.when}] " if report.when != "call" else ""
            texts.append(header + report.longreprtext)
    return "\n\n".join(texts)
