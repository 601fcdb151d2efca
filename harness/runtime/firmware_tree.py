"""The ExecuTorch source tree the MCU firmware compiles its runtime core from.

A profile's ``agent.source`` names one for its board, else ``ET_HARNESS_SOURCE=DIR``
does (a user's checkout, with its ``third-party/flatbuffers`` submodule); without
either the tree CI uses, ``../shared/vendor/executorch`` next to this repository, is
taken when present. With none, the firmware is built with the stand-in registry and
dispatch, and says so in HELLO (docs/mcu.md). The tree is only read: generated headers
and objects go to the harness cache. A profile may only name a tree the user's
environment trusts (:func:`check_trusted_source`): the firmware built from it runs in
QEMU with semihosting, through which guest code can open files on this machine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from harness import shipped
from harness.errors import UsageError
from harness.lifecycle.git import GitFailed, git_text
from harness.untrusted.trust import listed_by_user
from harness.untrusted.value_rules import ValueRuleError, expand_home, real_path

ENV_VAR = "ET_HARNESS_SOURCE"
# Trees a profile's agent.source may name besides $ET_HARNESS_SOURCE: the user's word.
TRUSTED_ENV = "ET_HARNESS_TRUSTED_SOURCES"
_NEEDED = ("runtime/executor/program.cpp", "schema/program.fbs", "version.txt")
_FLATBUFFERS = "third-party/flatbuffers/include/flatbuffers/flatbuffers.h"
# What the firmware compiles or includes from the tree; its hash is part of the firmware's.
_HASHED = ("runtime", "schema", "extension/data_loader", "version.txt")
_HASHED_SUFFIXES = (".cpp", ".h", ".fbs", ".txt")
_COMMIT = re.compile(r"\bcommit ([0-9a-f]{7,40})\b")
_GIT_TIMEOUT_S = 10


class RuntimeSourceError(UsageError):
    """The named source tree is not an ExecuTorch source tree the firmware can use."""


@dataclasses.dataclass(frozen=True)
class RuntimeSource:
    """An ExecuTorch source tree: where, which version and commit, and a hash of its files."""

    path: Path
    version: str
    commit: str
    digest: str


def find_runtime_source(env: dict[str, str] | None = None) -> RuntimeSource | None:
    """The tree ``ET_HARNESS_SOURCE`` names, else the shared one when present, else None."""
    named = (os.environ if env is None else env).get(ENV_VAR, "")
    if named:
        try:
            tree = expand_home(named, ENV_VAR)
        except ValueRuleError as exc:
            raise RuntimeSourceError(str(exc)) from None
        return runtime_source(tree, f"{ENV_VAR}={named}")
    shared = shared_tree()
    if shared is not None and (shared / "runtime" / "executor" / "program.cpp").is_file():
        return runtime_source(shared, str(shared))
    return None


def shared_tree() -> Path | None:
    """``../shared/vendor/executorch`` beside the harness's own checkout (the layout its CI
    runs in), or None when the harness runs installed."""
    top = shipped.checkout()
    return None if top is None else top.parent / "shared" / "vendor" / "executorch"


def check_trusted_source(path: Path, what: str) -> Path:
    """``path`` resolved, if it is an ExecuTorch source tree that ``$ET_HARNESS_SOURCE`` or
    ``$ET_HARNESS_TRUSTED_SOURCES`` names (or a directory holding it); ``what`` names the
    profile field, for errors. A profile is untrusted input (docs/security.md)."""
    resolved = real_path(path)
    if not (listed_by_user(resolved, ENV_VAR) or listed_by_user(resolved, TRUSTED_ENV)):
        raise RuntimeSourceError(
            f"{what}: {resolved} is not a trusted ExecuTorch source tree: the firmware built "
            "from it runs with semihosting, which can open files on this machine; add it to "
            f"{TRUSTED_ENV} (paths separated by '{os.pathsep}') in your environment to allow it"
        )
    check_tree(resolved, what)
    return resolved


def check_tree(path: Path, what: str) -> None:
    """Raise :class:`RuntimeSourceError` unless ``path`` holds what the firmware compiles."""
    for needed in _NEEDED:
        if not (path / needed).is_file():
            raise RuntimeSourceError(
                f"{what}: {path} is not an ExecuTorch source tree (no {needed}); point it at "
                "a checkout of github.com/pytorch/executorch"
            )
    if not (path / _FLATBUFFERS).is_file():
        raise RuntimeSourceError(
            f"{what}: {path}/third-party/flatbuffers is empty: run "
            "`git submodule update --init third-party/flatbuffers` in the tree"
        )


def runtime_source(path: Path, what: str) -> RuntimeSource:
    """Describe the tree at ``path``; ``what`` names where it came from, for errors."""
    path = path.resolve()
    check_tree(path, what)
    version = (path / "version.txt").read_text(encoding="utf-8").strip()[:32] or "unknown"
    return RuntimeSource(path, version, _commit(path), tree_digest(path, _HASHED))


def _commit(path: Path) -> str:
    """The tree's commit: from git in a checkout, else from the vendoring note beside it."""
    if (path / ".git").exists():
        try:
            commit = git_text(path, "rev-parse", "--short=7", "HEAD", timeout=_GIT_TIMEOUT_S)
        except GitFailed:
            return "unknown commit"
        if commit:
            return commit
    note = path.parent / "README.md"
    if note.is_file():
        found = _COMMIT.search(note.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found.group(1)[:7]
    return "unknown commit"


def tree_digest(tree: Path, parts: Sequence[str]) -> str:
    """The sha256 of the runtime's sources (C++, headers, schemas, text) under ``parts``
    of ``tree``, each file's path beside its bytes: what a build from the tree depends on."""
    digest = hashlib.sha256()
    for part in parts:
        base = tree / part
        files = [base] if base.is_file() else sorted(base.rglob("*"))
        for file in files:
            if file.is_file() and file.suffix in _HASHED_SUFFIXES:
                digest.update(str(file.relative_to(tree)).encode() + b"\0")
                digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()
