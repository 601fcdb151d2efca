"""The runtimes a run tests: ``--runtime 1.5.1,1.5.0,/opt/et,~/src/executorch@v1.5.0``.

Each entry of the list is one :class:`Runtime`, of one kind:

- ``wheel``: a pinned executorch wheel, ``1.5.1`` or ``wheel:1.5.1`` (a version in
  ``agent/executorch-sdk.lock``, :mod:`harness.runtime.wheel_sdk`);
- ``prefix``: an install prefix of one's own build, ``prefix:PATH`` or a ``PATH`` that
  holds ``lib/libexecutorch.so`` (:mod:`harness.runtime.install_prefix`);
- ``source``: an ExecuTorch source tree, ``source:PATH`` or a ``PATH`` that holds
  ``runtime/executor/program.cpp``; ``PATH@REV`` is the tree's git checkout at revision
  REV, which the harness builds from a worktree of its own in its cache (the user's
  checkout is only read).

The command line is the user's word, so a prefix or a tree named there needs no entry in
``$ET_HARNESS_TRUSTED_SDKS``; it is still checked as untrusted input: an entry that is
none of these is refused with one line naming the entry and the fix. Every test of a
device runs once per runtime, the runtime's :attr:`Runtime.label` in its id after the
device's (``test_x[host-1.5.0-program]``). :func:`sdk_for` is what the agent build is
given for a runtime.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.runtime.install_prefix import sdk_from_prefix
from harness.runtime.source_tree import SourceRuntimeError, commit_of, has_file
from harness.runtime.wheel_sdk import SdkError, SdkPaths, check_locked, ensure_sdk, locked_versions
from harness.untrusted.value_rules import ValueRuleError, expand_home

OPTION = "--runtime"
_MAX_ENTRIES = 16
_MAX_ENTRY = 1024  # characters: a path and a revision
_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[.+-]?[A-Za-z0-9.]+)?")
# A git revision as a user writes one (a commit, a tag, a branch, HEAD~3); never an option.
_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./~^{}-]{0,199}")
_PREFIX_MARK = Path("lib") / "libexecutorch.so"
_SOURCE_MARK = Path("runtime") / "executor" / "program.cpp"
_LABEL_CHARS = re.compile(r"[^A-Za-z0-9_.+-]")


class RuntimeKind(enum.Enum):
    WHEEL = "wheel"
    PREFIX = "prefix"
    SOURCE = "source"


class RuntimeEntryError(UsageError):
    """A ``--runtime`` entry is not a runtime the harness can build the agent against."""


@dataclass(frozen=True)
class Runtime:
    """One runtime under test: a pinned wheel's version, an install prefix or a source tree
    (at a git revision, or as it is)."""

    kind: RuntimeKind
    entry: str  # as given on the command line
    version: str = ""  # WHEEL
    path: Path | None = None  # PREFIX, SOURCE: resolved
    revision: str = ""  # SOURCE at a git revision
    commit: str = ""  # SOURCE at a git revision: the full commit it named when checked

    @property
    def label(self) -> str:
        """What test ids, results and the history call it: ``1.5.0``, ``prefix-NAME``,
        ``source-NAME`` or ``source-NAME@REV`` (NAME the directory's name)."""
        if self.kind is RuntimeKind.WHEEL:
            return self.version
        assert self.path is not None
        name = _LABEL_CHARS.sub("_", self.path.name)[:40] or "root"
        at = f"@{_LABEL_CHARS.sub('_', self.revision)[:40]}" if self.revision else ""
        return f"{self.kind.value}-{name}{at}"

    @property
    def wheel_version(self) -> str | None:
        """The executorch version HELLO must announce, when it is known before the build."""
        return self.version if self.kind is RuntimeKind.WHEEL else None


def parse_runtimes(spec: str | None) -> tuple[Runtime, ...]:
    """The runtimes ``--runtime`` lists, in order; () when it is not given (each device
    then runs what its profile, ``$ET_HARNESS_SDK`` or the lock file's default gives).

    Raises :class:`RuntimeEntryError` naming the entry and what to give instead.
    """
    if spec is None:
        return ()
    entries = [entry.strip() for entry in spec.split(",")]
    if not any(entries) or len(entries) > _MAX_ENTRIES:
        raise RuntimeEntryError(
            f"{OPTION} {_shown(spec)}: give 1 to {_MAX_ENTRIES} comma-separated runtimes: a "
            f"pinned version ({', '.join(locked_versions())}), an install prefix or a source "
            "tree (PATH or PATH@REV)"
        )
    runtimes: list[Runtime] = []
    for entry in entries:
        runtime = parse_runtime(entry)
        for known in runtimes:
            if known.label == runtime.label:
                raise RuntimeEntryError(
                    f"{OPTION} {_shown(entry)}: the same runtime as {_shown(known.entry)} "
                    f"(both are {runtime.label!r} in test ids); give each runtime once, and "
                    "directories of different names"
                )
            if runtime.commit and (known.path, known.commit) == (runtime.path, runtime.commit):
                raise RuntimeEntryError(
                    f"{OPTION} {_shown(entry)}: the same commit as {_shown(known.entry)} "
                    f"({runtime.commit[:12]}); give each commit once"
                )
        runtimes.append(runtime)
    return tuple(runtimes)


def parse_runtime(entry: str) -> Runtime:
    """One entry of ``--runtime``, checked (paths exist, a revision names a commit)."""
    where = f"{OPTION} {_shown(entry)}"
    if not entry or len(entry) > _MAX_ENTRY or any(ord(c) < 0x20 or c == "\x7f" for c in entry):
        raise RuntimeEntryError(
            f"{where}: an entry is a version, a path or PATH@REV of at most {_MAX_ENTRY} "
            "printable characters; check the list for an empty item or a stray character"
        )
    kind_word, colon, rest = entry.partition(":")
    if colon and kind_word in {k.value for k in RuntimeKind}:
        kind: RuntimeKind | None = RuntimeKind(kind_word)
        entry_body = rest
        if not rest.strip():
            what = "a pinned version" if kind is RuntimeKind.WHEEL else "a directory"
            raise RuntimeEntryError(f"{where}: give {what} after {kind_word}:")
    else:
        kind, entry_body = None, entry
    if kind is RuntimeKind.WHEEL or (kind is None and _VERSION.fullmatch(entry_body)):
        try:
            check_locked(entry_body, where)
        except SdkError as exc:
            raise RuntimeEntryError(str(exc)) from None
        return Runtime(RuntimeKind.WHEEL, entry, version=entry_body)
    path_text, revision = _split_revision(entry_body)
    try:
        path = expand_home(path_text)
    except ValueRuleError as exc:
        raise RuntimeEntryError(f"{where}: {exc}") from None
    if not path.is_dir():
        raise RuntimeEntryError(
            f"{where}: {path} is no directory, and {entry_body!r} is no pinned version "
            f"({', '.join(locked_versions())}); give an install prefix, a source tree "
            "(PATH or PATH@REV) or a pinned version"
        )
    path = path.resolve()
    if kind is None:
        kind = _kind_of_directory(path, where, revision)
    if kind is RuntimeKind.PREFIX:
        if revision:
            raise RuntimeEntryError(
                f"{where}: @{revision}: a revision goes with a source tree, not an install "
                "prefix; give source:PATH@REV, or the prefix alone"
            )
        try:
            sdk_from_prefix(path, where)  # its library, headers, package and version
        except SdkError as exc:
            raise RuntimeEntryError(str(exc)) from None
        return Runtime(RuntimeKind.PREFIX, entry, path=path)
    try:
        commit = commit_of(path, revision, where) if revision else ""
    except SourceRuntimeError as exc:
        raise RuntimeEntryError(str(exc)) from None
    if not has_file(path, commit or None, _SOURCE_MARK.as_posix()):
        at = f" at {revision}" if revision else ""
        raise RuntimeEntryError(
            f"{where}: {path}{at} is not an ExecuTorch source tree (no {_SOURCE_MARK}); "
            "point it at a checkout of github.com/pytorch/executorch"
        )
    return Runtime(RuntimeKind.SOURCE, entry, path=path, revision=revision, commit=commit)


def sdk_for(runtime: Runtime, abi: str) -> SdkPaths:
    """What the agent for ``abi`` is built against, for ``runtime``."""
    if runtime.kind is RuntimeKind.WHEEL:
        return ensure_sdk(abi, runtime.version)
    assert runtime.path is not None
    if runtime.kind is RuntimeKind.PREFIX:
        return sdk_from_prefix(runtime.path, f"{OPTION} {runtime.entry}")
    return _source_sdk(runtime, abi)


def _source_sdk(runtime: Runtime, abi: str) -> SdkPaths:
    """The one call into the source-tree build (:mod:`harness.runtime.source_tree`): the
    tree (at the commit checked), built for ``abi``, as the SDK the agent build takes."""
    from harness.runtime.source_tree import source_runtime

    assert runtime.path is not None
    return source_runtime(runtime.path, runtime.commit or None, abi)


def _is_dir(text: str) -> bool:
    try:
        return expand_home(text).is_dir()
    except ValueRuleError:  # said when the path is read
        return False


def _split_revision(body: str) -> tuple[str, str]:
    """``PATH@REV`` -> (PATH, REV): PATH the first directory before an ``@`` (a path and a
    revision may hold either character: ``~/src/et@2@feature/x``); a whole ``body`` that is
    a directory has no revision."""
    if _is_dir(body):
        return body, ""
    cuts = [n for n, c in enumerate(body) if c == "@"]
    n = next((n for n in cuts if _is_dir(body[:n])), cuts[-1] if cuts else -1)
    if n < 0:
        return body, ""
    path, revision = body[:n], body[n + 1 :]
    if not _REVISION.fullmatch(revision):
        raise RuntimeEntryError(
            f"{OPTION} {_shown(body)}: @{_shown(revision)} is not a git revision (a commit, "
            "tag or branch: letters, digits and ._/~^{}-, not starting with '-')"
        )
    return path, revision


def _kind_of_directory(path: Path, where: str, revision: str) -> RuntimeKind:
    if (path / _SOURCE_MARK).is_file() or revision:
        return RuntimeKind.SOURCE
    if (path / _PREFIX_MARK).is_file():
        return RuntimeKind.PREFIX
    raise RuntimeEntryError(
        f"{where}: {path} is neither an install prefix (no {_PREFIX_MARK}) nor a source "
        f"tree (no {_SOURCE_MARK}); point it at the prefix given to `cmake --install` or "
        "at a checkout of github.com/pytorch/executorch"
    )


def _shown(text: str) -> str:
    """``text`` quoted and cut for a one-line message."""
    return repr(text if len(text) <= 80 else text[:77] + "...")
