"""The results directory: ``results.jsonl`` written as tests end, ``run.json``, the HTML
report, artifacts.

``results.jsonl`` holds one :class:`~harness.farm.records.CaseResult` per line,
appended and flushed as each test ends, so a run that is killed keeps every test
that finished. ``run.json`` describes the run (command, host, devices, times,
exit status). ``artifacts/`` holds crash artifacts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from harness.farm import lab_holdings
from harness.farm.html_report import write_report
from harness.farm.records import CaseResult, ResultAssembler

RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
REPORT_FILE = "report.html"
ARTIFACTS_DIR = "artifacts"


def default_results_dir(base: Path) -> Path:
    """``base/results/<YYYYmmdd-HHMMSS>-<pid>``: a new directory per run."""
    return base / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def unwritable_reason(directory: Path) -> str | None:
    """Why ``directory`` could not be created or written to, or None if it could.

    Checked without creating anything: the directory itself if it exists, else its
    nearest existing ancestor, which must be a directory this process may write.
    """
    place = directory
    while not place.exists():
        if place.parent == place:
            break
        place = place.parent
    if not place.is_dir():
        return f"{place} is not a directory"
    if not os.access(place, os.W_OK | os.X_OK):
        return f"{place} is not writable"
    return None


@dataclass(frozen=True)
class RunInfo:
    """What ``run.json`` says about a run."""

    run: str
    command: tuple[str, ...]
    host: str
    devices: tuple[str, ...]
    started: float
    finished: float | None = None
    exit_status: int | None = None
    lab_holdings: tuple[dict[str, Any], ...] = ()  # harness.farm.lab_holdings

    @classmethod
    def starting(cls, run: str, command: Iterable[str], devices: Iterable[str]) -> RunInfo:
        return cls(run, tuple(command), socket.gethostname(), tuple(devices), time.time())

    def write(self, results_dir: Path) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        tmp = results_dir / f".{RUN_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2), "utf-8")
        os.replace(tmp, results_dir / RUN_FILE)


class ResultsWriter:
    """Appends results to ``results.jsonl``, one flushed line each; the file is created on
    the first result."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

    def write(self, result: CaseResult) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self.path, "a", encoding="utf-8")
        self._handle.write(result.to_json() + "\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()


class ResultsFileError(ValueError):
    """A results file has a line that is not a result (other than a cut-short last line)."""


def read_results(path: Path) -> list[CaseResult]:
    """The results in ``path``; a last line cut short by a killed run is skipped."""
    lines = [line for line in path.read_text("utf-8").splitlines() if line.strip()]
    results = []
    for number, line in enumerate(lines, 1):
        try:
            results.append(CaseResult.from_json(line))
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines):
                break
            raise ResultsFileError(f"{path}:{number}: not a test result: {exc}") from None
    return results


class ResultsRecorder:
    """The run's results as they come: assembled from reports, written as tests end.

    Writing starts with the first result of a device test (or at once when
    ``eager``), so that runs without devices (the project's own unit tests) leave
    no results directory behind.
    """

    def __init__(self, results_dir: Path, info: RunInfo, html_path: Path, eager: bool) -> None:
        self.results_dir = results_dir
        self.html_path = html_path
        self.info = info
        self.results: list[CaseResult] = []
        self._assembler = ResultAssembler(results_dir.name)
        self._writer = ResultsWriter(results_dir / RESULTS_FILE)
        self._active = False
        if eager:
            self._activate()

    @property
    def active(self) -> bool:
        return self._active

    def add(self, report: pytest.TestReport) -> CaseResult | None:
        """Take a report; when it completes a test, record (and maybe write) its result."""
        result = self._assembler.add(report)
        if result is None:
            return None
        self.results.append(result)
        if not self._active and result.device is not None:
            self._activate()
        elif self._active:
            self._writer.write(result)
        return result

    def _activate(self) -> None:
        self._active = True
        self.info.write(self.results_dir)
        for result in self.results:
            self._writer.write(result)

    def finish(self, exit_status: int) -> None:
        """Close the results file; write the HTML report and the final ``run.json``."""
        self._writer.close()
        if not self._active:
            return
        dataclasses.replace(
            self.info,
            finished=time.time(),
            exit_status=exit_status,
            lab_holdings=tuple(lab_holdings.read(self.results_dir)),
        ).write(self.results_dir)
        try:
            write_report(self.html_path, self.results, self.results_dir)
        except OSError as exc:  # checked at start-up, but the place may have changed since
            print(
                f"et-harness: --html-report {self.html_path}: cannot write it "
                f"({exc.strerror}); the results in {self.results_dir} are complete",
                file=sys.stderr,
            )
