"""An ExecuTorch source tree as a hosted device's runtime.

``ET_HARNESS_RUNTIME=PATH[@REV]`` builds the agent of every hosted device (host, the
arm64 boards, the glibc bundle of adb-emu) against the runtime compiled from the tree
at ``PATH`` (at revision ``REV`` if given): the runtime core, ``extension/module`` with
its data loaders and data maps, and the agent's probe backends
(``agent/cmake/executorch-from-source.cmake``). The wheel's real backends (XNNPACK, QNN,
OpenVINO) are linked against the wheel's own ``libexecutorch.so`` and cannot join a
core of another commit: such a device has only the probes, and says so in HELLO
(facts ``from_source`` and ``lacks``).

:func:`source_runtime` is the one entry point: a tree, an optional revision and an ABI
give the :class:`~harness.runtime.wheel_sdk.SdkPaths` the agent build consumes, as
:func:`~harness.runtime.install_prefix.sdk_from_prefix` does for an install prefix. A revision
is exported (``git archive``) into the harness cache, once per commit; the user's
checkout is only read. What the tree's API offers is read from its headers
(:func:`tree_api`), never from a list of commits, and becomes compile definitions.
Objects are cached by content with ccache (:func:`compiler_cache_env`): a neighbouring
commit recompiles only the files whose preprocessed text changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import filelock

from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import CacheEntry
from harness.lifecycle.git import GitFailed, git, git_text, git_text_or_empty
from harness.runtime.firmware_tree import shared_tree, tree_digest
from harness.runtime.source_description import SourceRuntime, TreeApi
from harness.runtime.wheel_sdk import SdkError, SdkPaths, ensure_sdk, host_abi
from harness.untrusted.value_rules import ValueRuleError, expand_home

RUNTIME_ENV = "ET_HARNESS_RUNTIME"
# Where a tree without its third-party/flatbuffers submodule takes the headers from.
FLATBUFFERS_ENV = "ET_HARNESS_FLATBUFFERS"
_FLATBUFFERS = Path("third-party/flatbuffers/include")
_NEEDED = ("runtime/executor/program.cpp", "extension/module/module.cpp", "version.txt")
_HASHED = ("runtime", "schema", "extension", "version.txt")
_UPSTREAM = re.compile(r"^upstream: (\S+)@([0-9a-f]{7,40})\s*$", re.MULTILINE)
_FLATC_TIMEOUT_S = 120
# Bumped when what source_runtime() writes into a runtime's home changes.
_LAYOUT_REVISION = 1


class SourceRuntimeError(SdkError):
    """A source tree (or its revision) cannot serve as a hosted device's runtime."""


def tree_api(tree: Path) -> TreeApi:
    """Read from the tree's headers what its API offers."""
    program = _read(tree / "runtime/executor/program.h")
    module = _read(tree / "extension/module/module.h")
    options_map = _read(tree / "runtime/backend/backend_options_map.h")
    return TreeApi(
        load_time_map=bool(options_map) and "LoadBackendOptionsMap" in program,
        module_load_map=bool(
            re.search(r"\bload\(\s*const\s+LoadBackendOptionsMap\s*&", module)
            and re.search(r"const\s+LoadBackendOptionsMap\s*\*\s*backend_options", module)
        ),
        entry_at=re.search(r"\bentry_at\s*\(", options_map) is not None,
        load_method_kernel_registry=re.search(
            r"LoadBackendOptionsMap\s*\*\s*backend_options\s*=\s*nullptr\s*,\s*"
            r"std::vector<Kernel>\s+kernel_registry",
            module,
        )
        is not None,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def parse_runtime(value: str) -> tuple[Path, str | None]:
    """``PATH[@REV]`` as a path and a revision (None without ``@``)."""
    path, at, revision = value.rpartition("@") if "@" in value else (value, "", "")
    if at and not revision:
        raise SourceRuntimeError(f"{value!r}: nothing after '@'; give PATH or PATH@REVISION")
    return _expanded(path), (revision or None)


def _expanded(value: str, named_by: str = "") -> Path:
    """:func:`expand_home` of ``value``, its refusal a :class:`SourceRuntimeError`."""
    try:
        return expand_home(value, named_by)
    except ValueRuleError as exc:
        raise SourceRuntimeError(str(exc)) from None


def runtime_from_environment() -> tuple[Path, str | None] | None:
    """``$ET_HARNESS_RUNTIME`` parsed, or None when unset or empty."""
    value = os.environ.get(RUNTIME_ENV, "")
    try:
        return parse_runtime(value) if value else None
    except SourceRuntimeError as exc:
        raise SourceRuntimeError(f"{RUNTIME_ENV}: {exc}") from None


def source_runtime(tree: Path, revision: str | None, abi: str) -> SdkPaths:
    """The SDK the agent build consumes for the runtime compiled from ``tree`` (at
    ``revision``, exported into the cache) for ``abi``: the wheel's paths (its
    ``flatc`` and schema make the programs) with :attr:`SdkPaths.source` set."""
    runtime = describe_source(tree, revision)
    generate_headers(runtime)
    write_facts(runtime)
    wheel = ensure_sdk(host_abi())
    return dataclasses.replace(wheel, abi=abi, version=runtime.version, source=runtime)


def check_source(tree: Path, revision: str | None) -> None:
    """What :func:`describe_source` refuses, checked without exporting or hashing the
    tree: a run's start refuses a bad ``$ET_HARNESS_RUNTIME`` in one line."""
    where = _where(tree, revision)
    checkout = _directory(tree, where)
    commit = commit_of(checkout, revision, where) if revision is not None else None
    for needed in _NEEDED:
        if not has_file(checkout, commit, needed):
            raise _not_a_tree(where, checkout, needed, revision)
    _flatbuffers(checkout, where)


def has_file(checkout: Path, commit: str | None, path: str) -> bool:
    """Whether the checkout holds the file ``path`` at ``commit`` (None: as checked out);
    ``path`` is relative to ``checkout``, which may be a subdirectory of its repository."""
    if commit is None:
        return (checkout / path).is_file()
    try:
        git(checkout, "cat-file", "-e", f"{commit}:./{path}")
    except GitFailed:
        return False
    return True


def _where(tree: Path, revision: str | None) -> str:
    return f"{RUNTIME_ENV}={tree}{'@' + revision if revision else ''}"


def _directory(tree: Path, where: str) -> Path:
    checkout = _expanded(str(tree), where).resolve()
    if not checkout.is_dir():
        raise SourceRuntimeError(f"{where}: {checkout} is not a directory")
    return checkout


def _not_a_tree(
    where: str, checkout: Path, needed: str, revision: str | None
) -> SourceRuntimeError:
    return SourceRuntimeError(
        f"{where}: {checkout} is not an ExecuTorch source tree (no {needed}"
        f"{' at ' + revision if revision else ''}); point it at a checkout of "
        "github.com/pytorch/executorch"
    )


def describe_source(tree: Path, revision: str | None) -> SourceRuntime:
    """The runtime ``tree`` (at ``revision``) gives, exporting the revision if needed."""
    where = _where(tree, revision)
    checkout = _directory(tree, where)
    if revision is not None:
        commit = commit_of(checkout, revision, where)
        home = cache_root() / "source-runtime" / f"{commit[:20]}-r{_LAYOUT_REVISION}"
        compiled = _export(checkout, commit, home, where)
        digest = commit
    else:
        commit = git_text_or_empty(checkout, "rev-parse", "HEAD")
        name = hashlib.sha256(str(checkout).encode()).hexdigest()[:20]
        home = cache_root() / "source-runtime" / f"tree-{name}-r{_LAYOUT_REVISION}"
        compiled = checkout
        digest = tree_digest(checkout, _HASHED)
    for needed in _NEEDED:
        if not (compiled / needed).is_file():
            raise _not_a_tree(where, checkout, needed, revision)
    message = git_text_or_empty(checkout, "log", "-1", "--format=%B", commit) if commit else ""
    return SourceRuntime(
        checkout=checkout,
        revision=revision,
        tree=compiled,
        home=home,
        flatbuffers=_flatbuffers(checkout, where),
        commit=commit,
        subject=message.splitlines()[0] if message else "",
        upstream=upstream_of(message),
        version=_read(compiled / "version.txt").strip()[:32] or "unknown",
        digest=digest,
        api=tree_api(compiled),
    )


def upstream_of(message: str) -> str:
    """``pytorch/executorch@<hash>`` from a commit message's ``upstream:`` line, or ""."""
    found = _UPSTREAM.search(message)
    return f"{found.group(1)}@{found.group(2)}" if found else ""


def _flatbuffers(checkout: Path, where: str) -> Path:
    named = os.environ.get(FLATBUFFERS_ENV, "")
    shared = shared_tree()
    for candidate in (
        _expanded(named, FLATBUFFERS_ENV) if named else None,
        checkout / _FLATBUFFERS,
        shared / _FLATBUFFERS if shared is not None else None,
    ):
        if candidate is not None and (candidate / "flatbuffers" / "flatbuffers.h").is_file():
            return candidate.resolve()
    raise SourceRuntimeError(
        f"{where}: no flatbuffers headers: {checkout / _FLATBUFFERS} is empty (run `git "
        "submodule update --init third-party/flatbuffers` in the tree), and "
        f"{FLATBUFFERS_ENV} names no folder holding flatbuffers/flatbuffers.h (a "
        "flatbuffers checkout's include folder)"
    )


def commit_of(tree: Path, revision: str, where: str) -> str:
    """The full commit ``revision`` names in the git checkout ``tree`` (only read);
    ``where`` names what gave the revision (``--good``, ``--runtime 'PATH@REV'``)."""
    said = ""
    try:
        commit = git_text(tree, "rev-parse", "--verify", "--quiet", "--end-of-options",
                          f"{revision}^{{commit}}")  # fmt: skip
    except GitFailed as exc:
        commit, said = "", exc.said[-200:]
    if not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        why = f" (git rev-parse: {said!r})" if said else ""
        raise SourceRuntimeError(
            f"{where}: {revision[:80]!r} names no commit in {tree}{why}; fetch it there, or "
            "give another revision"
        )
    return commit


def _export(checkout: Path, commit: str, home: Path, where: str) -> Path:
    """The commit's files in ``home/tree`` (``git archive``, once; never the checkout), a
    cache entry of kind ``source``: within the cache's bound, listed and cleaned with it."""
    tree = home / "tree"
    entry = CacheEntry("source", tree)
    if entry.use():
        return tree
    with entry.building(adopt=lambda: (home / "exported").is_file()) as intact:
        (home / "exported").unlink(missing_ok=True)  # an older harness's: the entry says now
        if intact:
            return tree
        paths = [
            p for p in _HASHED if git_text_or_empty(checkout, "ls-tree", "--name-only", commit, p)
        ]
        try:
            archived = git(checkout, "archive", "--format=tar", commit, *paths)
        except GitFailed as exc:
            raise SourceRuntimeError(
                f"{where}: git archive of {commit} failed: {exc.said}"
            ) from None
        staging = Path(tempfile.mkdtemp(dir=home, prefix=".tree-"))
        try:
            with tarfile.open(fileobj=io.BytesIO(archived)) as archive:
                archive.extractall(staging, filter="data")
            if tree.exists():  # left by an export interrupted before its commit
                shutil.rmtree(tree)
            staging.rename(tree)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        entry.commit()
    return tree


# Schema -> (where its headers go under gen/, flatc's extra options).
_SCHEMAS = (
    (("schema/program.fbs", "schema/scalar_type.fbs"), "executorch/schema", ()),
    (
        ("extension/flat_tensor/serialize/flat_tensor.fbs",
         "extension/flat_tensor/serialize/scalar_type.fbs"),
        "executorch/extension/flat_tensor/serialize",
        ("--cpp-std", "c++11", "--gen-mutable"),
    ),
)  # fmt: skip


def generate_headers(runtime: SourceRuntime) -> Path:
    """The tree's schema headers, made by the wheel's flatc, and ``root/executorch``."""
    gen = runtime.home / "gen"  # one name: compile commands stay alike (compiler_cache_env)
    if _read(gen / "complete") == runtime.digest:
        return gen
    flatc = ensure_sdk(host_abi()).flatc
    runtime.home.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(gen) + ".lock"):
        if _read(gen / "complete") == runtime.digest:
            return gen
        if gen.exists():
            shutil.rmtree(gen)
        for schemas, into, extra in _SCHEMAS:
            present = [str(runtime.tree / s) for s in schemas if (runtime.tree / s).is_file()]
            if not present:
                continue
            argv = [str(flatc), "--cpp", *extra, "--scoped-enums", "-o", str(gen / into), *present]
            done = subprocess.run(argv, capture_output=True, timeout=_FLATC_TIMEOUT_S, check=False)
            if done.returncode != 0:
                raise SourceRuntimeError(
                    f"{RUNTIME_ENV}: flatc could not compile {', '.join(schemas)} of "
                    f"{runtime.tree}: {done.stderr.decode(errors='replace').strip()[-500:]}"
                )
        (gen / "root").mkdir(parents=True, exist_ok=True)
        (gen / "root" / "executorch").symlink_to(runtime.tree, target_is_directory=True)
        (gen / "complete").write_text(runtime.digest)
    return gen


def facts_headers(runtime: SourceRuntime) -> dict[str, str]:
    """``etb_source_facts.h``, the tree's API (agent/runtime/src/tree_api.h), and
    ``etb_source_label.h``, what HELLO says of the runtime (runtime_label.cpp): apart, so
    that a neighbouring commit with the same API changes only the label's object."""
    top = "// Written by harness/runtime/source_tree.py: the runtime is compiled from source."
    api = [
        f"#define {name} {value}" for name, value in (d.split("=") for d in runtime.api.defines())
    ]
    label = [
        f"#define ETB_EXECUTORCH_VERSION {_c_string(runtime.label)}",
        f"#define ETB_SOURCE_PARTS {_c_string(runtime.from_source)}",
        f"#define ETB_SOURCE_LACKS {_c_string(' | '.join(runtime.api.absent()))}",
    ]
    return {
        name: "\n".join([top, "#pragma once", *lines]) + "\n"
        for name, lines in (("etb_source_facts.h", api), ("etb_source_label.h", label))
    }


def _c_string(text: str) -> str:
    """A C string literal of ``text`` (printable ASCII kept, the rest escaped)."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\?':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def write_facts(runtime: SourceRuntime) -> Path:
    """Write :func:`facts_headers` into ``home/facts`` (unless there already); return it."""
    directory = runtime.home / "facts"
    for name, text in facts_headers(runtime).items():
        header = directory / name
        if _read(header) != text:
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=directory, delete=False) as staging:
                staging.write(text)
            Path(staging.name).replace(header)
    return directory


def compiler_cache_env(base_dir: Path) -> dict[str, str]:
    """ccache's settings for a build under ``base_dir``: the object cache in the harness
    cache (or the user's own, when ``CCACHE_DIR`` names one: its size is then ccache's
    setting), keyed by the compiler's content, the flags and the preprocessed source;
    paths under ``base_dir`` hashed relative to it, so builds of neighbouring commits
    (each in its own directory) share their objects. Empty without ccache."""
    if shutil.which("ccache") is None:
        return {}
    users = os.environ.get("CCACHE_DIR")
    if users:
        where = {"CCACHE_DIR": users}
    else:
        where = {"CCACHE_DIR": str(cache_root() / "ccache"), "CCACHE_MAXSIZE": "2G"}
    return {
        **where,
        "CCACHE_BASEDIR": str(base_dir),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_COMPILERCHECK": "content",
    }
