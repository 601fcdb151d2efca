"""Race detectors' and memcheck's reports: parsed from their output, matched against the
suppressions.

ThreadSanitizer writes text reports (``WARNING: ThreadSanitizer: data race ...``
between ``==================`` lines); valgrind's helgrind, drd and memcheck write XML
(``--xml=yes``), one ``<error>`` element per report (memcheck's kinds: ``InvalidRead``,
``UninitCondition``, ...). Both are read here into :class:`RaceReport` values with their
stack frames, so that one suppression file (``agent/runtime/race-suppressions.yaml``)
serves all four tools. Every entry
of that file must say why it is there: a suppression is a claim about the
runtime, not a way to quieten a test.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from harness import shipped
from harness.codec.strict_yaml import read_yaml
from harness.errors import UsageError
from harness.untrusted.reading import InputFileError, brief, read_bounded_text

SUPPRESSIONS_NAME = "race-suppressions.yaml"  # in the agent's sources, agent/runtime/
TOOLS = ("tsan", "helgrind", "drd", "memcheck")
_FIRST_LINES = 12  # of a report, shown in a failing test's message

_TSAN_RULE = "=" * 18
_TSAN_START = re.compile(r"^WARNING: ThreadSanitizer: (?P<kind>.+?)(?: \(pid=\d+\))?$")
_TSAN_FRAME = re.compile(
    r"^\s*#\d+\s+(?P<rest>.*?)\s+\((?P<object>[^()]*?)\+0x[0-9a-f]+\)(?:\s+\(BuildId: \w+\))?$"
)
# Lines that say the detector itself failed, not the program under it.
_BROKEN_MARKERS = (
    "FATAL: ThreadSanitizer",
    "ThreadSanitizer: CHECK failed",
    "ThreadSanitizer: out of memory",
    "the 'impossible' happened",
    "VALGRIND INTERNAL ERROR",
    "Valgrind's memory management: out of memory",
    "valgrind: failed to start tool",
)


class SuppressionFileError(ValueError, UsageError):
    """The suppression file is malformed; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class Frame:
    """One stack frame of a report: function, the object it is in, file:line if known."""

    function: str
    object: str
    location: str = ""


@dataclass(frozen=True)
class RaceReport:
    """One report of a race detector (a data race, a lock-order inversion, ...)."""

    tool: str
    kind: str  # tsan: "data race", ...; valgrind: its <kind>, e.g. Race, LockOrder
    headline: str  # the report's first line
    stacks: tuple[tuple[Frame, ...], ...]  # innermost frame first; stacks[0] is the access
    text: str  # the report as the tool wrote it (tsan) or rendered from its XML (valgrind)
    # What the tool adds about the access and its memory: tsan's "Location is ..." line,
    # valgrind's auxwhat lines (drd: "Allocation context: BSS section of <library>", ...).
    memory: tuple[str, ...] = ()

    @property
    def frames(self) -> tuple[Frame, ...]:
        """Every frame of every stack, in the report's order."""
        return tuple(frame for stack in self.stacks for frame in stack)

    def first_lines(self, count: int = _FIRST_LINES) -> str:
        return "\n".join(self.text.splitlines()[:count])


@dataclass(frozen=True)
class Suppression:
    """A report pattern known not to be the agent's bug, with the reason it is known.

    It matches a report of one of ``tools`` whose kind matches ``kind`` and whose
    access (the innermost frame of its first stack) matches ``function`` and
    ``object``; with ``via``, a frame of one of its other stacks (the conflicting
    access, where the memory was allocated, ...) must match ``via`` too; with
    ``memory``, one of the tool's lines about the accessed memory must match it.
    Patterns are fnmatch patterns; ``object`` is matched against the library's file name.
    """

    id: str
    tools: tuple[str, ...]
    why: str
    kind: str = "*"
    function: str | None = None
    object: str | None = None
    via: str | None = None
    memory: str | None = None
    reference: str = ""  # e.g. the upstream issue, or the tool's manual

    def matches(self, report: RaceReport) -> bool:
        if report.tool not in self.tools or not fnmatch.fnmatchcase(report.kind, self.kind):
            return False
        if not report.stacks or not report.stacks[0]:
            return False
        access = report.stacks[0][0]
        if self.function is not None and not fnmatch.fnmatchcase(access.function, self.function):
            return False
        library = access.object.rsplit("/", 1)[-1]
        if self.object is not None and not fnmatch.fnmatchcase(library, self.object):
            return False
        if self.memory is not None and not any(
            fnmatch.fnmatchcase(note, self.memory) for note in report.memory
        ):
            return False
        others = (frame for stack in report.stacks[1:] for frame in stack)
        return self.via is None or any(fnmatch.fnmatchcase(f.function, self.via) for f in others)


@dataclass(frozen=True)
class Finding:
    """A report and the suppression that explains it, if one does."""

    report: RaceReport
    suppressed_by: Suppression | None


def classify(
    reports: Iterable[RaceReport], suppressions: Iterable[Suppression]
) -> tuple[Finding, ...]:
    """Each report with the first suppression that matches it (or none)."""
    rules = tuple(suppressions)
    return tuple(
        Finding(report, next((rule for rule in rules if rule.matches(report)), None))
        for report in reports
    )


def broken_detector_line(text: str) -> str | None:
    """The first line of ``text`` saying the detector itself failed, if any."""
    for line in text.splitlines():
        if any(marker in line for marker in _BROKEN_MARKERS):
            return line.strip()
    return None


# ---- ThreadSanitizer (text) ---------------------------------------------------------------


def complete_tsan_prefix(text: str) -> int:
    """How much of ``text`` holds only finished reports: an unfinished one is left to read."""
    open_at: int | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\n")
        if stripped == _TSAN_RULE:
            if open_at is None:
                open_at = offset
            elif line.endswith("\n"):
                open_at = None
        offset += len(line)
    if open_at is not None:
        return open_at
    return text.rfind("\n") + 1


def parse_tsan(text: str) -> list[RaceReport]:
    """The reports in ThreadSanitizer's output (its ``log_path`` file)."""
    reports = []
    block: list[str] | None = None
    for line in text.splitlines():
        if line == _TSAN_RULE:
            if block is not None and block:
                reports.append(_tsan_report(block))
                block = None
            else:
                block = []
        elif block is not None:
            block.append(line)
    return reports


def _tsan_report(lines: list[str]) -> RaceReport:
    headline = lines[0]
    start = _TSAN_START.match(headline)
    kind = start.group("kind") if start else "unknown"
    stacks: list[list[Frame]] = []
    memory: list[str] = []
    in_stack = False
    for line in lines[1:]:
        if line.strip().startswith("Location is "):
            memory.append(line.strip())
        frame = _TSAN_FRAME.match(line)
        if frame is None:
            in_stack = False
            continue
        if not in_stack:
            stacks.append([])
            in_stack = True
        rest = frame.group("rest")
        function, _, location = rest.rpartition(" ")
        if not function:  # "#3 <null> <null> (...)" has both; a bare name has no location
            function, location = rest, ""
        stacks[-1].append(Frame(function, frame.group("object"), location))
    return RaceReport(
        "tsan", kind, headline, tuple(map(tuple, stacks)), "\n".join(lines), tuple(memory)
    )


# ---- valgrind: helgrind and drd (XML) -----------------------------------------------------

_XML_ERROR = re.compile(r"<error>.*?</error>", re.DOTALL)


def complete_xml_prefix(text: str) -> int:
    """How much of ``text`` holds only finished ``<error>`` elements."""
    last_open = text.rfind("<error>")
    if last_open != -1 and text.find("</error>", last_open) == -1:
        return last_open
    return len(text)


def parse_valgrind_xml(tool: str, text: str) -> list[RaceReport]:
    """The ``<error>`` reports in a chunk of valgrind's XML output."""
    reports = []
    for match in _XML_ERROR.finditer(text):
        try:
            element = ElementTree.fromstring(match.group(0))
        except ElementTree.ParseError as exc:
            raise ValueError(
                f"{tool}: unreadable <error> element in its XML output: {exc}"
            ) from None
        reports.append(_valgrind_report(tool, element))
    return reports


def _valgrind_report(tool: str, error: ElementTree.Element) -> RaceReport:
    kind = error.findtext("kind", "unknown")
    lines: list[str] = []
    stacks: list[tuple[Frame, ...]] = []
    memory: list[str] = []
    for child in error:
        if child.tag in ("what", "auxwhat", "xwhat", "xauxwhat"):
            said = child.text if child.tag in ("what", "auxwhat") else child.findtext("text")
            said = (said or "").strip()
            if child.tag in ("auxwhat", "xauxwhat"):
                memory.append(said)
            lines.append(("  " if child.tag in ("auxwhat", "xauxwhat") else "") + said)
        elif child.tag == "stack":
            stacks.append(_valgrind_stack(child, lines))
        elif child.find("stack") is not None:  # drd: allocation_context, other_segment_*
            lines.append(f"  {child.tag}:")
            stacks += [_valgrind_stack(stack, lines) for stack in child.findall("stack")]
    headline = lines[0] if lines else kind
    return RaceReport(tool, kind, headline, tuple(stacks), "\n".join(lines), tuple(memory))


def _valgrind_stack(stack: ElementTree.Element, lines: list[str]) -> tuple[Frame, ...]:
    """The frames of a ``<stack>``, each also rendered as a line of ``lines``."""
    frames = tuple(_valgrind_frame(f) for f in stack.findall("frame"))
    for frame in frames:
        where = frame.location or f"in {frame.object}"
        lines.append(f"    {frame.function or '???'} ({where})")
    return frames


def _valgrind_frame(frame: ElementTree.Element) -> Frame:
    file, line = frame.findtext("file"), frame.findtext("line")
    location = f"{file}:{line}" if file and line else ""
    return Frame(frame.findtext("fn", ""), frame.findtext("obj", ""), location)


# ---- the suppression file -----------------------------------------------------------------

_ENTRY_FIELDS = {"id", "tools", "kind", "function", "object", "via", "memory", "why", "reference"}


def load_suppressions(path: Path | None = None) -> tuple[Suppression, ...]:
    """The suppressions in ``path`` (None: the shipped ``agent/runtime/race-suppressions.yaml``);
    every entry names its tools, a frame pattern and why."""
    if path is None:
        path = shipped.agent_dir() / "runtime" / SUPPRESSIONS_NAME
    try:
        data = read_yaml(read_bounded_text(path), str(path))
    except (InputFileError, OSError) as exc:
        raise SuppressionFileError(f"{path}: {exc}") from None
    if (
        not isinstance(data, dict)
        or set(data) != {"suppressions"}
        or not isinstance(data["suppressions"], list)
    ):
        raise SuppressionFileError(
            f"{path}: must be a mapping with one field, 'suppressions', a list"
        )
    entries = []
    seen: set[str] = set()
    for index, entry in enumerate(data["suppressions"]):
        rule = _suppression(entry, f"{path}: suppressions[{index}]")
        if rule.id in seen:
            raise SuppressionFileError(
                f"{path}: suppressions[{index}].id: {rule.id!r} is used twice"
            )
        seen.add(rule.id)
        entries.append(rule)
    return tuple(entries)


def _suppression(entry: object, where: str) -> Suppression:
    if not isinstance(entry, dict):
        raise SuppressionFileError(
            f"{where}: must be a mapping of {', '.join(sorted(_ENTRY_FIELDS))}"
        )
    unknown = sorted(set(entry) - _ENTRY_FIELDS)
    if unknown:
        raise SuppressionFileError(
            f"{where}.{unknown[0]}: unknown field; allowed: {', '.join(sorted(_ENTRY_FIELDS))}"
        )
    for field in ("id", "why"):
        if not isinstance(entry.get(field), str) or not entry[field].strip():
            raise SuppressionFileError(
                f"{where}.{field}: required, a non-empty string"
                + ("; say why the report is not the agent's bug" if field == "why" else "")
            )
    tools = entry.get("tools")
    if not isinstance(tools, list) or not tools or any(t not in TOOLS for t in tools):
        raise SuppressionFileError(
            f"{where}.tools: {brief(tools)}: must be a non-empty list of {', '.join(TOOLS)}"
        )
    if entry.get("function") is None and entry.get("object") is None:
        raise SuppressionFileError(
            f"{where}: give 'function' or 'object' (a pattern the report's access must match)"
        )
    for field in ("kind", "function", "object", "via", "memory", "reference"):
        if field in entry and not isinstance(entry[field], str):
            raise SuppressionFileError(
                f"{where}.{field}: must be a string; got {brief(entry[field])}"
            )
    frame = [entry[field] for field in ("function", "object") if entry.get(field) is not None]
    if all(set(pattern) <= set("*?") for pattern in frame):
        field = "function" if entry.get("function") is not None else "object"
        raise SuppressionFileError(
            f"{where}.{field}: {brief(entry[field])} matches any access, so the entry would "
            "explain every report; give a pattern naming the code, e.g. "
            "'executorch::extension::threadpool::*' or 'libxnnpack*.so'"
        )
    return Suppression(
        id=entry["id"], tools=tuple(tools), why=entry["why"].strip(),
        kind=entry.get("kind", "*"), function=entry.get("function"),
        object=entry.get("object"), via=entry.get("via"), memory=entry.get("memory"),
        reference=entry.get("reference", ""),
    )  # fmt: skip
