"""Crash artifacts: core files the device left after its agent died.

Kept modest on purpose. When a test's agent died (the link was lost), the
harness lists regular files named ``core`` or ``core.*`` directly in the
device's work directory, pulls each into the results directory and removes it
from the device, so that the next crash leaves new files. Each try of a test that
lost its agent gets a directory of its own (:class:`CrashArtifacts`), collected as
soon as the try failed (before the agent is restarted), so no crash's files
overwrite another's. Whether a crash
writes a core file there is the device's business: its ``kernel.core_pattern``
must name a plain file (not a ``|`` pipe to a crash handler), the agent's core
limit must allow it and its working directory must be the work directory (an
``agent.wrapper`` such as ``[sh, -c, 'cd "$0" && ulimit -c unlimited && exec
"$@"', /tmp/et-harness/host]`` arranges the last two). Not collected: cores
piped to systemd-coredump or apport, tombstones on Android, anything from
devices without a shell (MCUs); the agent's stderr tail is kept for every
failure instead. The files are found and pulled by the device
(:meth:`harness.devices.base.Device.collect_artifacts`).

A device that does not come back (its bring-up failed, its emulator did not start again,
it failed its health check and is quarantined) is closed, and what its emulator kept
goes with it: what shows why is kept first, in the test's ``device/`` directory
(:meth:`CrashArtifacts.keep_evidence`): the files its error carries (an emulator's
console log up to a failed boot, :attr:`harness.errors.InfrastructureError.kept`) and
what the farm copies from the device (its emulator's console log). The error's line then
names the kept copy (:meth:`CrashArtifacts.repoint`).

The agent's stderr tail goes into a failure's report section without the runtime's own
log lines (``E 00:00:00.027 executorch:cpuinfo_utils.cpp:62] ...``: XNNPACK writes the
same few in every failure); the whole tail, those lines included, is kept as the try's
``agent-stderr.txt`` (:meth:`CrashArtifacts.stderr_sections`), and the section names it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from harness.errors import InfrastructureError
from harness.results.directory import ARTIFACTS_DIR, describe_os_error
from harness.results.infra import every_exception
from harness.transport.base import TransportLost

# ExecuTorch's ET_LOG line: level, time since start, "executorch:", the source file and line.
_RUNTIME_LOG = re.compile(r"[DIWEF] \d+:\d\d:\d\d\.\d+ executorch:\S+:\d+\] ")


def lost_the_agent(exc: BaseException) -> bool:
    """True if ``exc`` or anything inside it (groups, causes) is a :class:`TransportLost`."""
    return any(isinstance(e, TransportLost) for e in every_exception(exc))


class CrashArtifacts:
    """The crash artifacts of one test: ``<results>/artifacts/<device>/<test>/try-N/``.

    Besides core files, a try's directory holds its race detector report, if the
    device runs one (:meth:`keep_text`, harness/runtime/race_detector.py).

    ``N`` is the try that lost its agent; a directory already there (a results
    directory used again) is never written into: the next free ``try-N-K`` is.
    """

    def __init__(self, results_dir: Path, device: str, test: str) -> None:
        self.results_dir = results_dir
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", test)[:120]
        self._base = results_dir / ARTIFACTS_DIR / device / name
        self._handled: list[BaseException] = []  # kept alive, so compared by identity
        self._tries: dict[int, Path] = {}  # try number -> the directory chosen for it
        self._moved: dict[str, str] = {}  # a kept file's original path -> its latest copy
        self._carried: list[BaseException] = []  # errors whose files were kept, by identity
        self.paths: list[str] = []  # relative to the results directory

    def after_failure(
        self, exc: BaseException, attempt: int, collect: Callable[[Path], list[Path]]
    ) -> None:
        """If try ``attempt`` (from 1) lost the agent with ``exc``, pull what it left.

        Each exception is handled once, however many hooks see it.
        """
        if any(seen is exc for seen in self._handled) or not lost_the_agent(exc):
            return
        self._handled.append(exc)
        try:
            pulled = collect(self._try_dir(attempt))
        except OSError as error:  # the results disk is full or read-only: the test goes on
            _not_kept(self._try_dir(attempt), error)
            return
        self.paths += [os.path.relpath(path, self.results_dir) for path in pulled]

    def keep_evidence(
        self, exc: BaseException, collect: Callable[[Path], list[Path]] | None = None
    ) -> list[Path]:
        """Keep what shows why a device failed before it is closed, in the test's
        ``device/`` directory: the files ``exc`` or an error inside it carries (each
        error's once) and what ``collect`` copies into the folder it is given
        (:meth:`~harness.devices.base.Device.copy_console_log`). Returns the new copies; a
        disk that refuses them costs one line on stderr, not the test."""
        folder = self._base / "device"
        carried: list[tuple[str, bytes]] = []
        for error in every_exception(exc):
            if isinstance(error, InfrastructureError) and error.kept:
                if not any(error is seen for seen in self._carried):
                    self._carried.append(error)
                    carried += error.kept
        copies = []
        try:
            for source, content in carried:
                folder.mkdir(parents=True, exist_ok=True)
                copy = _free_name(folder, Path(source).name)
                copy.write_bytes(content)
                self._moved[source] = str(copy)
                copies.append(copy)
            if collect is not None:
                scratch = _free_name(folder, "collected")
                for pulled in collect(scratch):
                    copies.append(pulled.replace(_free_name(folder, pulled.name)))
                if scratch.is_dir():
                    scratch.rmdir()
        except OSError as error:
            _not_kept(folder, error)
        self.paths += [os.path.relpath(copy, self.results_dir) for copy in copies]
        return copies

    def keep_and_name(
        self, exc: BaseException, collect: Callable[[Path], list[Path]] | None = None
    ) -> tuple[str, str]:
        """:meth:`keep_evidence`, then ``exc``'s message naming the kept copies
        (:meth:`repoint`) and ``; kept: ...`` for those it did not name (or "")."""
        kept = [str(path) for path in self.keep_evidence(exc, collect)]
        if isinstance(exc, InfrastructureError):  # and its own files kept before
            earlier = (self._moved.get(source) for source, _ in exc.kept)
            kept += [copy for copy in earlier if copy is not None and copy not in kept]
        text = self.repoint(str(exc))
        unnamed = [path for path in kept if path not in text]
        return text, f"; kept: {', '.join(unnamed)}" if unnamed else ""

    def repoint(self, text: str) -> str:
        """``text`` naming the kept copy wherever it named a file :meth:`keep_evidence` kept."""
        for source, copy in self._moved.items():
            text = text.replace(source, copy)
        return text

    def keep_text(self, attempt: int, name: str, text: str) -> str:
        """Write ``text`` as ``<name>`` in the directory of try ``attempt``; return its path,
        relative to the results directory (e.g. a race detector's report). A disk that
        refuses it costs one line on stderr, not the test."""
        path = self._try_dir(attempt) / name
        relative = os.path.relpath(path, self.results_dir)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", errors="replace")
        except OSError as error:
            _not_kept(path, error)
            return relative
        if relative not in self.paths:
            self.paths.append(relative)
        return relative

    def stderr_sections(self, attempt: int, tails: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (title, stderr tail) sections of a failure of try ``attempt``, each without
        the runtime's log lines: a tail that has any is kept whole as an artifact, and its
        section ends with where (and how many lines it left out)."""
        sections = []
        for number, (title, tail) in enumerate(tails, 1):
            lines = tail.splitlines()
            own = [line for line in lines if not _RUNTIME_LOG.match(line)]
            if len(own) < len(lines):
                name = "agent-stderr.txt" if len(tails) == 1 else f"agent-stderr-{number}.txt"
                path = self.keep_text(attempt, name, tail)
                kept = self.results_dir / path
                own.append(f"({len(lines) - len(own)} runtime log line(s) left out: {kept})")
            sections.append((title, "\n".join(own)))
        return sections

    def _try_dir(self, attempt: int) -> Path:
        """The directory of try ``attempt``: ``try-N``, or the next free ``try-N-K``."""
        if attempt not in self._tries:
            dest = self._base / f"try-{attempt}"
            again = 1
            while dest.exists():
                again += 1
                dest = self._base / f"try-{attempt}-{again}"
            self._tries[attempt] = dest
        return self._tries[attempt]


def _free_name(folder: Path, name: str) -> Path:
    """``folder/name``, or the first free ``folder/<stem>-K<suffix>`` (K from 2)."""
    path, again = folder / name, 1
    while path.exists():
        again += 1
        path = folder / f"{Path(name).stem}-{again}{Path(name).suffix}"
    return path


def _not_kept(path: Path, error: OSError) -> None:
    print(
        f"et-harness: cannot keep crash artifacts in {path}: {describe_os_error(error)}",
        file=sys.stderr,
    )
