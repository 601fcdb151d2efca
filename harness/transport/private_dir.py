"""Directories on this machine that only the harness's user (and root) can change.

The local transport runs the agent out of ``work_dir``, and the agent's loader looks
for libraries in its own directory first, so whoever can write a directory on that
path can run code as the user running the harness. Like OpenSSH's ``StrictModes``,
every existing component of the path must be owned by root or the current user and
not writable by group or others, unless it is a sticky directory owned by root (such
as ``/tmp``) above the work directory (the work directory itself, which the harness
fills, never); components the harness creates are made mode 0700. The same check
applies to a board's work directory over SFTP (:mod:`harness.transport.ssh`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath
from typing import Protocol, TypeVar

from harness.transport.base import DeviceUnavailable

_P = TypeVar("_P", bound=PurePath)


class UnsafeDirectoryError(DeviceUnavailable):
    """A directory the harness would use can be changed by another user."""


class FileStatus(Protocol):
    """What a check needs of a file's status: ``os.stat_result`` or paramiko's
    ``SFTPAttributes`` (whose fields may be missing)."""

    @property
    def st_mode(self) -> int | None: ...

    @property
    def st_uid(self) -> int | None: ...


def check_component(
    path: PurePath, info: FileStatus, me: int, what: str, filled: bool = False
) -> None:
    """Refuse ``path`` (one component of a work directory, ``info`` its ``lstat``) unless
    only ``me`` (a uid) and root can change it. ``filled``: ``path`` is the work directory
    itself, which a sticky bit does not make private (another user can still make the
    subdirectories and files the harness would write there)."""
    mode, uid = info.st_mode, info.st_uid
    if mode is None or uid is None:
        raise UnsafeDirectoryError(
            f"{what}: cannot tell who owns {path} (its status has no mode or owner): "
            "choose a work_dir of your own"
        )
    if stat.S_ISLNK(mode):
        if uid not in (0, me):
            raise UnsafeDirectoryError(
                f"{what}: {path} is a symbolic link owned by uid {uid}, not by you or "
                "root; another user could point it anywhere: choose a work_dir of your own"
            )
        return  # the directory it names is checked as part of the resolved path
    if not stat.S_ISDIR(mode):
        raise UnsafeDirectoryError(f"{what}: {path} is not a directory")
    if uid not in (0, me):
        raise UnsafeDirectoryError(
            f"{what}: {path} is owned by uid {uid}, not by you (uid {me}) or root; "
            "files there could run as you: choose a work_dir of your own"
        )
    writable = mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and filled:
        raise UnsafeDirectoryError(
            f"{what}: {path} is writable by {'group' if mode & stat.S_IWGRP else 'others'}"
            f" (mode {stat.S_IMODE(mode):04o}), and the harness fills it: even when sticky, "
            "another user can make the subdirectories and files it would write there; give "
            f"a directory of your own below it, e.g. {path / 'et-harness'}"
        )
    if writable and not (mode & stat.S_ISVTX and uid == 0):
        raise UnsafeDirectoryError(
            f"{what}: {path} is writable by {'group' if mode & stat.S_IWGRP else 'others'}"
            f" (mode {stat.S_IMODE(mode):04o}); files there could run as you: "
            f"chmod go-w {path} or choose a work_dir of your own"
        )


def components(path: _P) -> list[_P]:
    """``path`` and each directory above it, the root first."""
    return [*reversed(path.parents), path]


def _check(path: Path, what: str, filled: bool = False) -> None:
    check_component(path, os.lstat(path), os.geteuid(), what, filled)


def ensure_private_dir(path: Path, what: str) -> Path:
    """Create ``path`` (missing parts mode 0700) after checking every existing component.

    ``what`` names the setting for error messages (``devices/host.yaml: work_dir``).
    Both the path as given and the path its links resolve to are checked.
    """
    if not path.is_absolute():
        raise UnsafeDirectoryError(f"{what}: {path} is not an absolute path")
    for part in components(path):
        try:
            _check(part, what, part == path)
        except FileNotFoundError:
            try:
                os.mkdir(part, 0o700)
            except FileExistsError:
                pass  # made meanwhile (by another run of ours, or not): checked below
            _check(part, what, part == path)
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError), a part gone
        reason = exc.strerror if isinstance(exc, OSError) else "a symlink loop"
        raise UnsafeDirectoryError(
            f"{what}: {path}: its links cannot be followed ({reason}); give a directory"
        ) from None
    for part in components(resolved):
        _check(part, what, part == resolved)
    return path
