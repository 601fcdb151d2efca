"""A run and its tests as the history keeps them, and how they are made from results.

:class:`RunRecord` and :class:`CaseRecord` are what the analyses read; :func:`case_row`
turns a :class:`~harness.results.records.CaseResult` (the very record ``results.jsonl``
gets) into a row of ``et_history_cases``; :class:`RunIdentity` is what a run says
about the harness and the runtime, written beside ``run.json`` as ``history.json``
so that catching up from a results directory later records the same.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import __version__, shipped
from harness.errors import UsageError
from harness.lifecycle.git import git_text_or_empty
from harness.results.directory import RunInfo
from harness.results.infra import one_line
from harness.results.records import CaseResult
from harness.untrusted import json_fields as fields
from harness.untrusted.reading import brief, read_bounded_text

IDENTITY_FILE = "history.json"
# Run states: written as it goes; ended with run.json's exit status; its writer is gone.
RUNNING, COMPLETE, INCOMPLETE = "running", "complete", "incomplete"
# The runtime's commit, for runs on one's own ExecuTorch build (CI sets it).
RUNTIME_COMMIT_ENV = "ET_HARNESS_RUNTIME_COMMIT"
FAILING = frozenset({"failed", "error", "xpassed"})  # the check is wrong (not device trouble)
QUARANTINED = "DeviceQuarantined"
_SHOWN_DIFFERENCES = 3
_DIFFERENCES_LIMIT = 600


@dataclass(frozen=True)
class RunIdentity:
    """The harness and runtime a run used."""

    harness_version: str
    harness_commit: str
    sdk_source: str  # "wheel executorch==1.5.1", "prefix /opt/et" or "source /src/et@v1.5.0"
    sdk_commit: str

    @classmethod
    def of_this_process(cls, runtimes: Sequence[str] = ()) -> RunIdentity:
        """This harness, and the run's ``runtimes`` (``--runtime`` labels) if it chose any,
        else the runtime the environment gives."""
        from harness.runtime.install_prefix import prefix_from_environment
        from harness.runtime.source_tree import RUNTIME_ENV
        from harness.runtime.wheel_sdk import default_version

        prefix = prefix_from_environment()
        source = os.environ.get(RUNTIME_ENV, "")
        if runtimes:
            described = f"runtimes {','.join(runtimes)}"
        elif source:
            described = f"source {source}"
        else:
            described = f"prefix {prefix}" if prefix else f"wheel executorch=={default_version()}"
        return cls(
            harness_version=__version__,
            harness_commit=_git_commit(),
            sdk_source=described,
            sdk_commit=os.environ.get(RUNTIME_COMMIT_ENV, ""),
        )

    def write(self, results_dir: Path) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        (results_dir / IDENTITY_FILE).write_text(json.dumps(asdict(self), indent=2), "utf-8")

    @classmethod
    def read(cls, results_dir: Path) -> RunIdentity:
        """The identity a run wrote, or an unknown one (a run from before the history, or
        a file not as the harness writes it: results directories travel between hosts)."""
        try:
            data = fields.load_object(read_bounded_text(results_dir / IDENTITY_FILE), "the file")
            return cls(**{key: fields.text(data, key, "") for key in cls.__dataclass_fields__})
        except ValueError:  # missing or unreadable (InputFileError), JSON, a field's type
            return cls("", "", "", "")


def _git_commit() -> str:
    """The harness's own commit when it runs from its own checkout, else "" (installed)."""
    checkout = shipped.checkout()
    if checkout is None or not (checkout / ".git").exists():
        return ""
    return git_text_or_empty(checkout, "rev-parse", "HEAD", timeout=10)


@dataclass(frozen=True)
class RunRecord:
    """One run: who, what, when, and whether it ended."""

    id: str  # HOST/NAME/START
    name: str
    host: str
    devices: tuple[str, ...]
    suites: tuple[str, ...]  # of its tests, sorted
    started: float
    finished: float | None
    exit_status: int | None
    state: str
    harness_version: str
    sdk_source: str
    sdk_commit: str
    results_dir: str
    runtimes: tuple[str, ...] = ()  # the labels of a run across runtimes (--runtime)

    @classmethod
    def of_row(cls, row: Mapping[Any, Any], suites: Iterable[str]) -> RunRecord:
        values = _typed(cls, row, "run", exclude="suites")
        values["devices"] = _split(row["devices"])
        values["runtimes"] = _split(row["runtimes"])
        return cls(**values, suites=tuple(sorted(suites)))

    def comparable(self, other: RunRecord) -> bool:
        """Same suites on the same devices and runtimes."""
        mine = (set(self.devices), set(self.runtimes), self.suites)
        return mine == (set(other.devices), set(other.runtimes), other.suites)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


CheckKey = tuple[str, str, str]  # (test id, device, runtime label)


@dataclass(frozen=True)
class CaseRecord:
    """One test of one run."""

    run_id: str
    nodeid: str
    device: str
    outcome: str
    duration: float
    runtime: str
    agent_version: str
    load_paths: tuple[str, ...]
    backends: tuple[str, ...]  # the backends it was about: its real ones, else its probes
    differences: str
    infra_type: str
    infra_cause: str
    tries: int
    place: str
    runtime_label: str  # the runtime it ran (--runtime), "" for the device's own

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING

    @property
    def key(self) -> CheckKey:
        """The check across runs: the test on its device with its runtime."""
        return (self.nodeid, self.device, self.runtime_label)

    @property
    def where(self) -> str:
        """``host``, or ``host@1.5.0`` for a test of a run across runtimes."""
        return f"{self.device}@{self.runtime_label}" if self.runtime_label else self.device

    @classmethod
    def of_row(cls, row: Mapping[Any, Any]) -> CaseRecord:
        values = _typed(cls, row, "test")
        values.update(load_paths=_split(row["load_paths"]), backends=_split(row["backends"]))
        return cls(**values)


class DamagedRecord(ValueError, UsageError):
    """A row of the history holds a value of a type the harness never writes there."""


# What a row's column may hold, by the record field's annotation (lists are joined text).
_COLUMN_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "tuple[str, ...]": (str,),
    "float": (int, float),
    "float | None": (int, float, type(None)),
    "int": (int,),
    "int | None": (int, type(None)),
}


def _typed(
    record: type[RunRecord | CaseRecord], row: Mapping[Any, Any], what: str, exclude: str = ""
) -> dict[str, Any]:
    """The row's values for ``record``'s fields, each of the type the harness writes; a
    store changed by other hands (or a damaged one) is :class:`DamagedRecord`."""
    values = {}
    for field in dataclasses.fields(record):
        name = field.name
        if name == exclude:
            continue
        value = row[name]
        allowed = _COLUMN_TYPES[str(field.type)]
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise DamagedRecord(
                f"a {what} of run {brief(row['run_id' if 'run_id' in row else 'id'])} holds "
                f"{brief(value)} ({type(value).__name__}) as its {name}, not "
                f"{' or '.join(t.__name__ for t in allowed)}"
            )
        values[name] = value
    return values


def _split(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(",") if part)


def _short_differences(result: CaseResult) -> str:
    """The verdicts' differences, the first few; for a failure without any, its error line
    (pytest's first ``E`` line)."""
    lines = [d for v in result.verdicts for d in v.differences]
    if not lines and result.outcome in FAILING:
        lines = result.error_lines[:1]
    shown = lines[:_SHOWN_DIFFERENCES]
    if len(lines) > len(shown):
        shown.append(f"... and {len(lines) - len(shown)} more")
    return one_line("; ".join(shown), _DIFFERENCES_LIMIT)


def _backends_under_test(result: CaseResult) -> list[str]:
    """The backends a test was about: the real ones its verdicts checked (those HELLO
    named, ``real_backends``), or its probes when it checked no real backend."""
    checked = list(dict.fromkeys(name for v in result.verdicts for name, _ in v.backends))
    real = set(result.facts.get("real_backends", "").split(","))
    return [name for name in checked if name in real] or checked


def case_row(run_id: str, seq: int, result: CaseResult) -> dict[str, Any]:
    """The ``et_history_cases`` row of ``result``, the ``seq``-th result of its run."""
    routes = dict.fromkeys(v.route for v in result.verdicts)
    backends = _backends_under_test(result)
    return {
        "run_id": run_id,
        "nodeid": result.nodeid,
        "seq": seq,
        "suite": result.suite,
        "device": result.device or "",
        "outcome": result.outcome,
        "duration": result.duration,
        "started": result.started,
        "runtime": result.facts.get("runtime", ""),
        "agent_version": result.facts.get("agent_version", ""),
        "load_paths": ",".join(routes),
        "backends": ",".join(backends),
        "differences": _short_differences(result),
        "infra_type": result.infra.type if result.infra else "",
        "infra_cause": one_line(result.infra.message) if result.infra else "",
        "tries": 1 + len(result.failed_tries),
        "place": result.facts.get("place", ""),
        "exporter": result.facts.get("exporter", ""),
        "runtime_label": result.runtime_label,
    }


def run_id(info: RunInfo) -> str:
    """A run's key: ``HOST/NAME/START``. A results directory's name is unique on its host
    at best (a nightly job's ``--results-dir results/emulated`` is the same every night)."""
    return f"{info.host[:100]}/{info.run[:150]}/{info.started:.6f}"


def run_row(
    info: RunInfo, identity: RunIdentity, results_dir: Path, writer: str, source: str
) -> dict[str, Any]:
    """The ``et_history_runs`` row of a run starting (``finished`` comes at its end)."""
    return {
        "id": run_id(info),
        "name": info.run,
        "host": info.host,
        "command": json.dumps(list(info.command)),
        "devices": ",".join(info.devices),
        "runtimes": ",".join(info.runtimes),
        "results_dir": str(results_dir),
        **asdict(identity),
        "started": info.started,
        "finished": None,
        "exit_status": None,
        "state": RUNNING,
        "writer": writer,
        "source": source,
    }
