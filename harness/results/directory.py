"""The results directory: ``results.jsonl`` written as tests end, ``run.json``, the HTML
report, artifacts.

``results.jsonl`` holds one :class:`~harness.results.records.CaseResult` per line,
appended and flushed as each test ends, so a run that is killed keeps every test
that finished; a disk that fills or turns read-only costs neither the run nor a
whole line (:class:`ResultsWriter`). ``run.json`` describes the run (command, host, devices, times,
exit status). ``artifacts/`` holds crash artifacts.
"""

from __future__ import annotations

import collections
import dataclasses
import errno
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from harness import __version__
from harness.errors import UsageError
from harness.results import lab_holdings
from harness.results.html_report import write_report
from harness.results.records import CaseResult, ResultAssembler
from harness.untrusted.reading import InputFileError, read_bounded_text

RESULTS_FILE = "results.jsonl"
# Some 200 times the results of a whole suites run on host (630 KB): a run's results
# file, or a merge of a nightly's, is read whole.
MAX_RESULTS_BYTES = 128 << 20
RUN_FILE = "run.json"
REPORT_FILE = "report.html"
ARTIFACTS_DIR = "artifacts"
HELD_BYTES = 64 << 20  # results held in memory while the disk refuses them
_TAIL_CHUNK = 1 << 16


@dataclass(frozen=True)
class ResultsFolder:
    """Where the run writes its results and its HTML report."""

    results_dir: Path
    html_path: Path
    eager: bool  # named on the command line: written even by a run without device tests


def default_results_dir(base: Path) -> Path:
    """``base/results/<YYYYmmdd-HHMMSS>-<pid>``: a new directory per run."""
    return base / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def unwritable_reason(directory: Path) -> str | None:
    """Why ``directory`` could not be created or written to, or None if it could.

    Checked on the directory itself if it exists, else its nearest existing ancestor,
    which must be a directory this process may write: a probe directory is made in it
    and removed again.
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
    try:  # root passes os.access everywhere, /proc included: a probe directory tells
        probe = tempfile.mkdtemp(prefix=".et-harness-probe-", dir=place)
    except OSError as exc:
        return f"{place} is not writable ({describe_os_error(exc)})"
    os.rmdir(probe)
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
    lab_holdings: tuple[dict[str, Any], ...] = ()  # harness.results.lab_holdings
    runtimes: tuple[str, ...] = ()  # the labels of --runtime (harness.runtime.choice)
    harness_version: str = ""  # harness.__version__ of the run's harness

    @classmethod
    def starting(
        cls, run: str, command: Iterable[str], devices: Iterable[str], runtimes: Iterable[str] = ()
    ) -> RunInfo:
        return cls(
            run,
            tuple(command),
            socket.gethostname(),
            tuple(devices),
            time.time(),
            runtimes=tuple(runtimes),
            harness_version=__version__,
        )

    def write(self, results_dir: Path) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        tmp = results_dir / f".{RUN_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2), "utf-8")
        os.replace(tmp, results_dir / RUN_FILE)


class ResultsWriter:
    """Appends results to ``results.jsonl``, whole lines only; the file is created on the
    first result.

    A line is written by one ``os.write`` loop on a file opened for that line, so no
    file stays open between tests (a filesystem can be remounted read-only under a
    run). A write that fails (a full or read-only disk) is cut back to the last whole
    line and reported once, on stderr, naming the path and the error; the results
    from then on are held in memory (at most :data:`HELD_BYTES`) and written, in
    order, as soon as a write succeeds again, or by :meth:`close`. A file that ends
    in a cut-short line (a killed run) is repaired when it is opened: the fragment
    is dropped. What could not be written is counted in :attr:`unwritten`.
    """

    def __init__(self, path: Path, held_bytes: int = HELD_BYTES) -> None:
        self.path = path
        self.error: OSError | None = None  # the last failed write, None once one succeeds
        self.dropped = 0  # results neither written nor held (over the memory bound)
        self._held: collections.deque[bytes] = collections.deque()
        self._held_size = 0
        self._held_bytes = held_bytes
        self._reported = False
        self._checked = False  # the file's end was checked for a cut-short line

    @property
    def unwritten(self) -> int:
        """How many results given to :meth:`write` are not in the file."""
        return len(self._held) + self.dropped

    def write(self, result: CaseResult) -> None:
        line = (result.to_json() + "\n").encode("utf-8")
        if self._held_size + len(line) > self._held_bytes:
            self.dropped += 1
        else:
            self._held.append(line)
            self._held_size += len(line)
        self._write_held()

    def close(self) -> None:
        """Write what is held, if the disk takes it now."""
        self._write_held()

    def _write_held(self) -> None:
        if not self._held:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            self._failed(exc)
            return
        try:
            if not self._checked:
                _drop_cut_short_line(fd)
                self._checked = True
            while self._held:
                _append_line(fd, self._held[0])
                self._held_size -= len(self._held.popleft())
            self.error = None
        except OSError as exc:
            self._checked = False  # a cut back that failed too is repaired on the next open
            self._failed(exc)
        finally:
            os.close(fd)

    def _failed(self, exc: OSError) -> None:
        self.error = exc
        if not self._reported:
            self._reported = True
            print(
                f"et-harness: cannot write {self.path}: {describe_os_error(exc)}; the run "
                f"goes on, holding its results in memory (up to {self._held_bytes >> 20} MiB) "
                "until the disk takes them again",
                file=sys.stderr,
            )


def describe_os_error(exc: OSError) -> str:
    """``No space left on device (ENOSPC)``: the message and the errno's name."""
    name = errno.errorcode.get(exc.errno or 0, f"errno {exc.errno}")
    return f"{exc.strerror or exc} ({name})"


def _append_line(fd: int, line: bytes) -> None:
    """Append ``line`` whole, or cut the file back to where it was and raise."""
    start = os.fstat(fd).st_size
    done = 0
    try:
        while done < len(line):
            done += os.write(fd, line[done:])
    except OSError:
        if done:
            os.ftruncate(fd, start)  # if this fails too, the next open repairs the file
        raise


def _drop_cut_short_line(fd: int) -> None:
    """Cut the file back to its last whole line (a killed run may have left part of one)."""
    size = os.fstat(fd).st_size
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    if end != size:
        os.ftruncate(fd, end)


class ResultsFileError(ValueError, UsageError):
    """A results file has a line that is not a result (other than a cut-short last line)."""


def read_results(path: Path) -> list[CaseResult]:
    """The results in ``path``, read within :data:`MAX_RESULTS_BYTES` (the file may come
    from another host); a last line cut short by a killed run is skipped."""
    try:
        text = read_bounded_text(path, MAX_RESULTS_BYTES)
    except InputFileError as exc:
        raise ResultsFileError(str(exc)) from None
    lines = [line for line in text.splitlines() if line.strip()]
    cut_short = not text.endswith("\n")  # a killed run's last write
    results = []
    for number, line in enumerate(lines, 1):
        try:
            results.append(CaseResult.from_json(line))
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines) and cut_short and isinstance(exc, json.JSONDecodeError):
                break
            raise ResultsFileError(f"{path}:{number}: not a test result: {exc}") from None
    return results


class RunListener(Protocol):
    """Gets what the results file gets, as it gets it (e.g. the history store)."""

    def run_started(self, info: RunInfo, results_dir: Path) -> None: ...

    def result_written(self, result: CaseResult) -> None: ...

    def run_finished(self, info: RunInfo) -> None: ...

    def report_section(self, results: Sequence[CaseResult]) -> str:
        """HTML for the run's report (placed after its overview), or ""."""
        ...


class ResultsRecorder:
    """The run's results as they come: assembled from reports, written as tests end.

    Writing starts with the first result of a device test (or at once when
    ``eager``), so that runs without devices (the project's own unit tests) leave
    no results directory behind. ``listeners`` get the same, at the same moments.
    """

    def __init__(
        self,
        results_dir: Path,
        info: RunInfo,
        html_path: Path,
        eager: bool,
        listeners: Sequence[RunListener] = (),
    ) -> None:
        self.results_dir = results_dir
        self.html_path = html_path
        self.info = info
        self.listeners = tuple(listeners)
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
            self._write(result)
        return result

    @property
    def unwritten(self) -> int:
        """How many results are not in ``results.jsonl`` (its disk refused them)."""
        return self._writer.unwritten

    def unwritten_line(self) -> str | None:
        """What the run's report says when results could not be written, else None."""
        error = self._writer.error
        if not self.unwritten:
            return None
        why = describe_os_error(error) if error is not None else "over the memory bound"
        return (
            f"NOT WRITTEN: {self.unwritten} of {len(self.results)} results are not in "
            f"{self._writer.path} ({why}); they are only in this summary and the JUnit "
            "XML, if any"
        )

    def _activate(self) -> None:
        self._active = True
        self._write_info(self.info)
        for listener in self.listeners:
            listener.run_started(self.info, self.results_dir)
        for result in self.results:
            self._write(result)

    def _write(self, result: CaseResult) -> None:
        self._writer.write(result)
        for listener in self.listeners:
            listener.result_written(result)

    def _write_info(self, info: RunInfo) -> None:
        try:
            info.write(self.results_dir)
        except OSError as exc:
            print(
                f"et-harness: cannot write {self.results_dir / RUN_FILE}: {describe_os_error(exc)}",
                file=sys.stderr,
            )

    def finish(self, exit_status: int) -> None:
        """Write what the results file still lacks; write the HTML report and the final
        ``run.json``. A disk that still refuses them costs the results it refused
        (:meth:`unwritten_line`), never the report or the run."""
        self._writer.close()
        if not self._active:
            return
        final = dataclasses.replace(
            self.info,
            finished=time.time(),
            exit_status=exit_status,
            lab_holdings=tuple(lab_holdings.read(self.results_dir)),
        )
        self._write_info(final)
        for listener in self.listeners:
            listener.run_finished(final)
        appendix = "".join(listener.report_section(self.results) for listener in self.listeners)
        try:
            write_report(self.html_path, self.results, self.results_dir, appendix=appendix)
        except OSError as exc:  # checked at start-up, but the place may have changed since
            print(
                f"et-harness: --html-report {self.html_path}: cannot write it "
                f"({describe_os_error(exc)}); the results are in {self.results_dir}",
                file=sys.stderr,
            )
