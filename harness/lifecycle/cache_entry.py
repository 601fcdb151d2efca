"""Cached builds as entries: each records what it holds, is checked before use and made
again when damaged, and the cache they make up stays within a bound.

An entry is one path in the cache (a directory or a file) that a builder makes once and
many runs use: an SDK, an agent build, a glibc bundle, a firmware image, a program. Its
name carries the hash of what it was made from. Beside it, ``<path>.entry`` is its
manifest: its kind and each file's size, modification time and SHA-256, written when the
builder commits it; an entry without one is not complete. A builder does::

    entry = CacheEntry("agent", target)
    if not entry.use():                      # intact, and now held by this process
        with entry.building() as intact:     # the builder's lock; a damaged entry removed
            if not intact:
                make(target)
                entry.commit()               # manifest written, cache trimmed

- :meth:`CacheEntry.use` checks every file's size, and the hash of a file whose
  modification time moved (cheap: a stat per file), then holds the entry: a shared
  ``flock`` on its manifest, kept until the process ends, and notes its last use (the
  manifest's modification time).
- :meth:`CacheEntry.building` takes the builder's lock (``<path>.lock``); under it a
  damaged entry is removed with one line on stderr, and an entry an older harness made
  (no manifest, complete by the builder's own test, ``adopt``) is recorded as it is.
- :func:`trim` keeps the cache's entries within :func:`size_limit`
  (``$ET_HARNESS_CACHE_LIMIT``), the least recently used removed first, never one a
  running process holds or builds. A commit trims once the entries committed since the
  last trim (a count every process shares, in the cache) pass a hundredth of the bound:
  a trim reads every manifest, and a run can commit dozens of small programs.

Concurrent runs share entries safely: builders serialise on the lock, a removal takes
both locks without waiting (a busy entry is skipped) and moves the entry aside before
its manifest goes, so no reader ever takes a half-removed entry for a complete one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import filelock

from harness.errors import UsageError
from harness.lifecycle.cache import cache_root
from harness.lifecycle.disk import writing

MANIFEST_SUFFIX = ".entry"
# What the cache holds: ``et-harness cache --kind`` takes one of these.
KINDS = ("sdk", "agent", "bundle", "firmware", "program", "user-program", "source", "board")
LOCK_SUFFIX = ".lock"
LIMIT_ENV = "ET_HARNESS_CACHE_LIMIT"
# Enough for a CI runner's full run (both SDKs, the agents, a bundle, a few firmware
# images: about 400 MB) several times over; a runner's disk has some 14 GB free.
DEFAULT_LIMIT = 2 << 30
_FORMAT = 1
_MAX_MANIFEST_BYTES = 16 << 20
_ASIDE = ".removing-"  # an entry moved aside to be removed
# Where entries sit in the cache: sdk/x, programs/user/x, source-runtime/<commit>/agent/x.
_ENTRY_FOLDERS = ("*", "*/*", "*/*/*")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_BEYOND_ANY_DISK = 1 << 60  # an exabyte: a larger limit is a typo

# manifest path -> the open file whose shared lock holds the entry for this process
_HELD: dict[Path, int] = {}


class CacheLimitError(ValueError, UsageError):
    """``$ET_HARNESS_CACHE_LIMIT`` is no size."""


@dataclass(frozen=True)
class EntryInfo:
    """One complete entry, as the cache listing shows it."""

    kind: str
    path: Path
    size: int  # bytes, as recorded when it was made
    last_use: float  # seconds since the epoch

    @property
    def manifest(self) -> Path:
        return _manifest_of(self.path)


class CacheEntry:
    """One entry of ``kind`` at ``path`` (see the module)."""

    def __init__(self, kind: str, path: Path) -> None:
        assert kind in KINDS, kind
        self.kind = kind
        self.path = path
        self.manifest = _manifest_of(path)

    def use(self, *, again: bool = False) -> bool:
        """True when the entry is complete and intact; it is then held by this process
        until it ends, and its last use is now. False when absent or damaged. An entry
        this process holds is checked once, unless ``again``."""
        held = _HELD.get(self.manifest)
        if held is not None and not again and _same_file(held, self.manifest):
            return True
        try:
            handle = os.open(self.manifest, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(handle, fcntl.LOCK_SH)
            if not _same_file(handle, self.manifest):  # removed or replaced meanwhile
                os.close(handle)
                return self.use(again=again)
            if _damage(self.path, _read_manifest(handle)) is not None:
                os.close(handle)
                return False
        except ValueError:  # a record that is none: the builder says so and makes it again
            os.close(handle)
            return False
        except BaseException:
            os.close(handle)
            raise
        if held is not None:
            os.close(held)
        _HELD[self.manifest] = handle
        try:
            os.utime(self.manifest)
        except OSError:
            pass  # a read-only cache is still used; its order is not kept
        return True

    @contextmanager
    def building(self, adopt: Callable[[], bool] | None = None) -> Iterator[bool]:
        """The builder's lock; yields True when the entry is intact under it (another
        process made it, or ``adopt()`` says an older harness's is complete)."""
        with writing(self.path.parent, f"making the {self.kind} cache entry"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = filelock.FileLock(str(self.path) + LOCK_SUFFIX)
            lock.acquire()
        try:
            if self.use(again=True):
                yield True
                return
            if self.manifest.exists():
                reason = self.damage() or "its record cannot be read"
                print(
                    f"cache: {self.path} is damaged ({reason}); removing it and making it again",
                    file=sys.stderr,
                    flush=True,
                )
                self.discard()
            elif adopt is not None and self.path.exists() and adopt():
                self.commit(trim_after=False)
                yield True
                return
            yield False
        finally:
            lock.release()

    def damage(self) -> str | None:
        """What is wrong with the entry (a file missing, of another size or content), or
        None when it matches its manifest."""
        try:
            with open(self.manifest, "rb") as handle:
                manifest = _read_manifest(handle.fileno())
        except (OSError, ValueError) as exc:
            return f"its record {self.manifest.name} cannot be read: {exc}"
        return _damage(self.path, manifest)

    def commit(self, *, trim_after: bool = True) -> None:
        """Record what the entry holds (it is complete from now on), hold it, then trim
        the cache to its bound."""
        with writing(self.path.parent, f"recording the {self.kind} cache entry"):
            record = _record(self.kind, self.path)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as sink:
                    json.dump(record, sink)
                os.replace(tmp, self.manifest)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        self.use()
        if trim_after and _trim_due(cast(int, record["bytes"])):
            trim()

    def discard(self) -> None:
        """Remove the entry and its manifest (the builder's lock held, or both free)."""
        held = _HELD.pop(self.manifest, None)
        if held is not None:
            os.close(held)
        _remove(self.path, self.manifest)


def size_limit() -> int:
    """The cache's bound in bytes: ``$ET_HARNESS_CACHE_LIMIT`` (``500M``, ``2G``, bytes)."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_LIMIT
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", text.lower())
    size = float(match.group(1)) * _UNITS[match.group(2)] if match else math.nan
    if not 0 <= size < _BEYOND_ANY_DISK:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise CacheLimitError(
            f"{LIMIT_ENV}={shown!r} is no size a disk has; give bytes or a number with K, M, "
            "G or T (e.g. 2G)"
        )
    return int(size)


def entries(kind: str | None = None) -> list[EntryInfo]:
    """The cache's complete entries (of ``kind``, if given), least recently used first."""
    root = cache_root()
    found = []
    patterns = (f"{folders}/*{MANIFEST_SUFFIX}" for folders in _ENTRY_FOLDERS)
    for manifest in (hit for pattern in patterns for hit in root.glob(pattern)):
        try:
            with open(manifest, "rb") as handle:
                record = _read_manifest(handle.fileno())
            last_use = manifest.stat().st_mtime
        except (OSError, ValueError):
            continue  # being replaced or removed
        if kind is None or record["kind"] == kind:
            path = manifest.with_name(manifest.name[: -len(MANIFEST_SUFFIX)])
            found.append(EntryInfo(record["kind"], path, record["bytes"], last_use))
    return sorted(found, key=lambda e: (e.last_use, str(e.path)))


TRIM_SHARE = 100  # a trim after a hundredth of the bound was committed since the last
_ADDED_NAME = "added-since-trim"


def _trim_due(added: int) -> bool:
    """Add ``added`` bytes to what was committed since the last trim; whether that passes
    a hundredth of the bound (the count then starts again). Kept in the cache for every
    process, under an ``flock``; a count that cannot be read or kept makes a trim due."""
    try:
        handle = os.open(cache_root() / _ADDED_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return True
    with os.fdopen(handle, "r+b") as count:
        fcntl.flock(count, fcntl.LOCK_EX)
        text = count.read(32) or b"0"  # a new count
        total = int(text) + added if text.isdigit() else None
        due = total is None or total >= size_limit() // TRIM_SHARE
        try:
            count.seek(0)
            count.truncate()
            count.write(b"0" if due else str(total).encode())
        except OSError:
            return True
    return due


def trim(limit: int | None = None) -> list[EntryInfo]:
    """Remove the least recently used entries until the cache's entries take at most
    ``limit`` bytes (default :func:`size_limit`); an entry a running process holds or
    builds stays. Returns what was removed; nothing when another process trims."""
    limit = size_limit() if limit is None else limit
    root = cache_root()
    try:
        with filelock.FileLock(str(root / "trim.lock"), timeout=0):
            listed = entries()
            total = sum(e.size for e in listed)
            removed = []
            for entry in listed:
                if total <= limit:
                    break
                if remove_unless_busy(entry):
                    total -= entry.size
                    removed.append(entry)
            _sweep_aside(root)
            return removed
    except filelock.Timeout:
        return []
    except OSError:
        return []  # a cache that cannot be written is not trimmed now: the next write says


def remove_unless_busy(entry: EntryInfo) -> bool:
    """Remove ``entry`` unless a process holds it or builds it; True if removed."""
    build_lock = filelock.FileLock(str(entry.path) + LOCK_SUFFIX, timeout=0)
    try:
        build_lock.acquire()
    except filelock.Timeout:
        return False
    try:
        try:
            handle = os.open(entry.manifest, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False  # removed by someone else
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            return False
        try:
            if not _same_file(handle, entry.manifest):
                return False
            _remove(entry.path, entry.manifest)
        finally:
            os.close(handle)
        return True
    finally:
        build_lock.release()


def _remove(path: Path, manifest: Path) -> None:
    """Move ``path`` aside, then drop its manifest, then delete it: interrupted anywhere,
    what is left is never a complete entry."""
    aside = path.with_name(f".{path.name}{_ASIDE}{os.getpid()}-{time.monotonic_ns()}")
    try:
        path.rename(aside)
    except FileNotFoundError:
        manifest.unlink(missing_ok=True)
        return
    manifest.unlink(missing_ok=True)
    _delete(aside)


def _sweep_aside(root: Path) -> None:
    """Delete what an interrupted removal moved aside."""
    for pattern in (f"{folders}/.*{_ASIDE}*" for folders in _ENTRY_FOLDERS):
        for path in root.glob(pattern):
            _delete(path)


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _manifest_of(path: Path) -> Path:
    return path.with_name(path.name + MANIFEST_SUFFIX)


def _same_file(handle: int, path: Path) -> bool:
    try:
        mine, there = os.fstat(handle), path.stat()
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


def _files(path: Path) -> Iterator[tuple[str, Path]]:
    """Every file of the entry by its name in the manifest (``.`` for a file entry)."""
    if not path.is_dir() or path.is_symlink():
        yield ".", path
        return
    for directory, _, names in os.walk(path):
        for name in sorted(names):
            full = Path(directory, name)
            yield full.relative_to(path).as_posix(), full


def _record(kind: str, path: Path) -> dict[str, object]:
    files: dict[str, list[object]] = {}
    links: dict[str, str] = {}
    total = 0
    for name, full in _files(path):
        if full.is_symlink():
            links[name] = os.readlink(full)
            continue
        stat = full.stat()
        files[name] = [stat.st_size, stat.st_mtime_ns, _sha256(full)]
        total += stat.st_size
    return {
        "format": _FORMAT, "kind": kind, "made": time.time(), "bytes": total,
        "files": files, "links": links,
    }  # fmt: skip


def _read_manifest(handle: int) -> dict[str, Any]:
    """The manifest read from ``handle`` (from its start); ValueError if it is not one."""
    data = os.pread(handle, _MAX_MANIFEST_BYTES + 1, 0)
    if len(data) > _MAX_MANIFEST_BYTES:
        raise ValueError(f"over {_MAX_MANIFEST_BYTES} bytes")
    record = json.loads(data)
    if not isinstance(record, dict) or record.get("format") != _FORMAT:
        raise ValueError("not a cache entry record of this harness")
    if not isinstance(record.get("kind"), str) or not isinstance(record.get("bytes"), int):
        raise ValueError("no kind or size")
    return record


def _damage(path: Path, record: dict[str, Any]) -> str | None:
    files = record.get("files")
    links = record.get("links")
    if not isinstance(files, dict) or not isinstance(links, dict):
        return "its record lists no files"
    if not all(isinstance(v, list) and len(v) == 3 for v in files.values()):
        return "its record's files are not size, time and hash"
    for name, (size, mtime_ns, digest) in files.items():
        full = path if name == "." else path / name
        try:
            stat = full.stat()
        except OSError:
            return f"{name} is missing"
        if stat.st_size != size:
            return f"{name} has {stat.st_size} bytes, {size} when it was made"
        if stat.st_mtime_ns != mtime_ns and _sha256(full) != digest:
            return f"{name} has other content than when it was made"
    for name, target in links.items():
        try:
            if os.readlink(path / name) != target:
                return f"{name} links elsewhere than when it was made"
        except OSError:
            return f"{name} is missing"
    return None


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
