"""The host agent under a dynamic checker: ThreadSanitizer, valgrind's helgrind or drd
(races), or valgrind's memcheck (invalid reads and writes, uninitialised values).

A device profile picks one with ``agent.race_detector`` (:class:`RaceDetector`);
nothing else about the detector comes from the profile (profiles are untrusted
input), and only the local host device may pick one. ``tsan`` runs the agent's
ThreadSanitizer build variant (``ETB_SANITIZER=thread``); ``helgrind``, ``drd`` and
``memcheck`` run the plain agent under valgrind, which sees the wheel's libraries too.
Either way the detector writes its reports to files of its own, one per agent process,
in a private directory (:class:`RaceLog`); after each test the harness reads what was added
(:meth:`RaceLog.take`) and a report that no entry of the suppression file
explains fails the test (:class:`RaceReported`). A detector that broke is an
infrastructure error (:class:`DetectorBroke`). See docs/agent.md, "Race detectors".
"""

from __future__ import annotations

import enum
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CheckFailure, UsageError
from harness.runtime.race_reports import (
    SUPPRESSIONS_NAME,
    Finding,
    Suppression,
    broken_detector_line,
    classify,
    complete_tsan_prefix,
    complete_xml_prefix,
    load_suppressions,
    parse_tsan,
    parse_valgrind_xml,
)
from harness.transport.base import TransportError
from harness.untrusted.reading import brief

MAX_TAKE_BYTES = 4 * 1024 * 1024  # of one output file per test; the rest is skipped, and said so
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._/+-]+")  # a directory TSAN_OPTIONS can hold unquoted


class RaceDetector(enum.Enum):
    """The checkers a profile may choose (``agent.race_detector``): three race detectors
    and memcheck, which sees memory errors instead."""

    TSAN = "tsan"
    HELGRIND = "helgrind"
    DRD = "drd"
    MEMCHECK = "memcheck"

    @property
    def finds(self) -> str:
        """What its reports are, for messages: "race" or "memory error"."""
        return "memory error" if self is RaceDetector.MEMCHECK else "race"

    @property
    def sanitizer(self) -> str | None:
        """The agent build variant it needs (harness.runtime.agent_build.SANITIZERS), if any."""
        return "thread" if self is RaceDetector.TSAN else None


# Leaks are reported at the agent's exit, which belongs to no request (with --xml=yes
# valgrind 3.19 still writes them unless no kind is shown); an uninitialised value is
# reported where it matters (a branch, an address, a system call) by itself.
MEMCHECK_OPTIONS = ("--leak-check=no", "--show-leak-kinds=none", "--errors-for-leak-kinds=none",
                    "--undef-value-errors=yes")  # fmt: skip


class RaceDetectorChoiceError(ValueError, UsageError):
    """``agent.race_detector`` is not allowed here; the message names file, field and fix."""


def check_race_detector(
    value: object,
    src: str,
    kind: str,
    emulator: str | None,
    prebuilt: bool,
    local_kinds: tuple[str, ...],
) -> RaceDetector | None:
    """The profile's ``agent.race_detector`` (None if absent), checked against the device;
    ``local_kinds`` are the device kinds that are this machine (from the registry)."""
    if value is None:
        return None
    allowed = ", ".join(d.value for d in RaceDetector)
    try:
        detector = RaceDetector(value)
    except ValueError:
        raise RaceDetectorChoiceError(
            f"{src}: agent.race_detector: {brief(value)} is not one of {allowed}; "
            "pick one or remove the field"
        ) from None
    if kind not in local_kinds or emulator is not None:
        here = ", ".join(local_kinds)
        raise RaceDetectorChoiceError(
            f"{src}: agent.race_detector: {detector.value} runs only on the local host device "
            f"(transport.kind: {here}, no emulator), not on {kind}"
            f"{' emulator ' + emulator if emulator else ''}; remove the field"
        )
    if prebuilt and detector.sanitizer is not None:
        raise RaceDetectorChoiceError(
            f"{src}: agent.race_detector: {detector.value} runs the harness's own "
            f"{detector.sanitizer}-sanitized build, not agent.prebuilt: remove one of them"
        )
    return detector


class DetectorBroke(TransportError):
    """The race detector itself failed (not installed, crashed, refused to run)."""


class RaceReported(AssertionError, CheckFailure):
    """The detector reported something no suppression explains: the test fails."""


@dataclass(frozen=True)
class RaceCheck:
    """What the detector wrote while one test ran."""

    detector: RaceDetector
    output: str  # the detector's raw output, each file's part under a header line
    findings: tuple[Finding, ...]
    broken: str | None  # the line saying the detector failed, if one did
    truncated: bool  # some output was over MAX_TAKE_BYTES and skipped

    @property
    def unsuppressed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.suppressed_by is None)

    def artifact_text(self) -> str:
        """The report kept with the test: a summary, then the detector's output."""
        summary = (
            f"# {self.detector.value}: {len(self.findings)} report(s), "
            f"{len(self.unsuppressed)} not suppressed ({SUPPRESSIONS_NAME})"
        )
        lines = [summary]
        for finding in self.findings:
            rule = finding.suppressed_by
            verdict = f"suppressed by {rule.id}: {rule.why}" if rule else "NOT SUPPRESSED"
            lines.append(f"# - {finding.report.headline} -- {verdict}")
        if self.broken:
            lines.append(f"# the detector failed: {self.broken}")
        if self.truncated:
            lines.append(f"# output over {MAX_TAKE_BYTES} bytes per file was skipped")
        return "\n".join(lines) + "\n\n" + self.output

    def raise_for_findings(self, artifact: str = "") -> None:
        """:class:`DetectorBroke` if the detector failed; :class:`RaceReported` if it reported
        something unsuppressed, with the first lines of the first such report."""
        __tracebackhide__ = True
        kept = f"; the full report: {artifact}" if artifact else ""
        if self.broken:
            raise DetectorBroke(
                f"the race detector {self.detector.value} failed: {self.broken}{kept}"
            )
        if self.unsuppressed:
            first = self.unsuppressed[0].report
            raise RaceReported(
                f"{self.detector.value} reported {len(self.unsuppressed)} "
                f"{self.detector.finds} report(s) that "
                f"no entry of agent/runtime/{SUPPRESSIONS_NAME} "
                f"explains{kept}; the first:\n{first.first_lines()}"
            )


class RaceLog:
    """The detector's output files for one device's agents, in ``directory``.

    :meth:`launch` gives what an agent start needs; :meth:`take` returns what the
    detector wrote since the last take. Detectors write a report when they find
    it, before the agent answers the request that ran into it, so a take after a
    test's last report sees every report of that test. Reports at the agent's exit
    (when the device closes) belong to no test and are not read.
    """

    def __init__(
        self,
        detector: RaceDetector,
        directory: Path,
        suppressions: tuple[Suppression, ...] | None = None,
    ) -> None:
        self.detector = detector
        self.directory = directory
        self.suppressions = load_suppressions() if suppressions is None else suppressions
        self._offsets: dict[str, int] = {}

    def launch(self) -> tuple[tuple[str, ...], dict[str, str]]:
        """(argv to put before the agent's, environment to add) for one agent start."""
        where = str(self.directory)
        if not _PLAIN_PATH.fullmatch(where):
            raise DetectorBroke(
                f"the race detector's log directory {where!r} has characters its options "
                "cannot carry; set ET_HARNESS_CACHE to a plain path"
            )
        if self.detector is RaceDetector.TSAN:
            options = (
                f"log_path={where}/tsan halt_on_error=0 second_deadlock_stack=1 "
                "report_signal_unsafe=1 history_size=4"
            )
            return (), {"TSAN_OPTIONS": options}
        valgrind = shutil.which("valgrind")
        if valgrind is None:
            raise DetectorBroke(
                f"race_detector {self.detector.value} needs valgrind, which is not on PATH; "
                "install it (apt-get install valgrind)"
            )
        tool = self.detector.value
        argv = (valgrind, f"--tool={tool}", "--xml=yes", f"--xml-file={where}/{tool}.%p.xml",
                f"--log-file={where}/{tool}.%p.log", "--num-callers=40", "--error-limit=no",
                "--child-silent-after-fork=yes",
                *(MEMCHECK_OPTIONS if self.detector is RaceDetector.MEMCHECK else ()))  # fmt: skip
        return argv, {}

    def take(self) -> RaceCheck:
        """Everything the detector finished writing since the last take, parsed and classified."""
        parts: list[str] = []
        reports = []
        broken: str | None = None
        truncated = False
        for path in sorted(self.directory.iterdir()):
            chunk, cut = self._read_new(path)
            truncated |= cut
            if not chunk:
                continue
            parts.append(f"## {path.name}\n{chunk}")
            broken = broken or broken_detector_line(chunk)
            if path.name.startswith("tsan."):
                reports += parse_tsan(chunk)
            elif path.suffix == ".xml":
                try:
                    reports += parse_valgrind_xml(self.detector.value, chunk)
                except ValueError as exc:
                    broken = broken or str(exc)
        findings = classify(reports, self.suppressions)
        return RaceCheck(self.detector, "\n".join(parts), findings, broken, truncated)

    def _read_new(self, path: Path) -> tuple[str, bool]:
        """The finished part of what ``path`` got since the last read, and whether some was cut."""
        offset = self._offsets.get(path.name, 0)
        try:
            size = path.stat().st_size
            with path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read(MAX_TAKE_BYTES)
        except OSError as exc:
            raise DetectorBroke(f"cannot read the race detector's output {path}: {exc}") from None
        text = data.decode("utf-8", "surrogateescape")
        cut = size - offset > len(data)
        if cut:  # skip the rest: the next take starts at the end
            self._offsets[path.name] = size
            return text, True
        if path.name.startswith("tsan."):
            done = complete_tsan_prefix(text)
        elif path.suffix == ".xml":
            done = complete_xml_prefix(text)
        else:
            done = len(text)
        finished = text[:done]
        self._offsets[path.name] = offset + len(finished.encode("utf-8", "surrogateescape"))
        return finished.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), False
