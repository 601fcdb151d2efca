"""A folder of the harness's own that cannot be written: one line saying which, what the
step needed there and what to do.

The cache, the data folder (the run history) and the work folders are the harness's,
not the user's input: when one is full, read-only or over quota, what fails is the
machine around the run, so :class:`DiskTrouble` is an infrastructure error (the device's
tests end as ``infra``, and its bring-up quarantines it: the line is shown once per
device, not as a third party's traceback per test). :func:`writing` turns the
``OSError`` of such a disk into it, and checks first that the step's size fits, when the
step knows it.
"""

from __future__ import annotations

import errno
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import InfrastructureError
from harness.lifecycle.cache import CACHE_ENV, DATA_ENV, cache_root, data_root

# errno -> what the disk is, as the line says it
DISK_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "the file system is read-only",
    errno.EDQUOT: "the disk quota is used up",
}
# The same, as a tool's output (pip, make, a compiler) says them.
_SAID = re.compile(
    r"\[Errno (?P<number>28|30|122)\]|(?P<text>No space left on device|Read-only file system|"
    r"Disk quota exceeded)"
)
_TEXT_ERRNO = {
    "No space left on device": errno.ENOSPC,
    "Read-only file system": errno.EROFS,
    "Disk quota exceeded": errno.EDQUOT,
}


class DiskTrouble(InfrastructureError):
    """A cache, data or work folder of the harness cannot be written: full, read-only, quota."""

    def __init__(self, message: str, folder: Path) -> None:
        super().__init__(message)
        self.folder = folder


def as_disk_trouble(exc: OSError, folder: Path, step: str, needed: int = 0) -> DiskTrouble | None:
    """The one line for ``exc`` when it is a full, read-only or over-quota disk's."""
    number = exc.errno
    if number is None or number not in DISK_ERRNOS:
        return None
    return disk_trouble(folder, step, number, needed)


def disk_trouble(folder: Path, step: str, number: int, needed: int = 0) -> DiskTrouble:
    """The one line for ``step`` failing in ``folder`` with ``errno`` ``number``."""
    need = f" needs about {human_size(needed)} there" if needed else ""
    try:
        free = f", {human_size(shutil.disk_usage(_existing(folder)).free)} free"
    except OSError:
        free = ""
    if number == errno.EROFS:
        fix = "make it writable"
    else:
        fix = "free space there" if number == errno.ENOSPC else "raise the quota or free space"
    place = "writable folder" if number == errno.EROFS else "folder with room"
    if _inside(folder, cache_root()):
        elsewhere = f", or point {CACHE_ENV} at a {place}"
    elif _inside(folder, data_root()):  # the run history's
        elsewhere = f", or point {DATA_ENV} at a {place}"
    else:
        elsewhere = f", or give the device a work_dir in a {place}"
    return DiskTrouble(
        f"{folder}: {DISK_ERRNOS[number]} ({step}{need}{free}): {fix}{elsewhere}", folder
    )


def said_in(output: str) -> int | None:
    """The errno of a disk trouble a tool's ``output`` reports, if it reports one."""
    found = _SAID.search(output)
    if found is None:
        return None
    if found.group("number"):
        return int(found.group("number"))
    return _TEXT_ERRNO[found.group("text")]


def require_space(folder: Path, step: str, needed: int) -> None:
    """:class:`DiskTrouble` unless ``folder``'s disk has ``needed`` bytes free."""
    try:
        free = shutil.disk_usage(_existing(folder)).free
    except OSError:
        return  # a folder not there yet whose disk cannot be asked: the write will tell
    if free < needed:
        raise disk_trouble(folder, step, errno.ENOSPC, needed)


@contextmanager
def writing(folder: Path, step: str, needed: int = 0) -> Iterator[None]:
    """Run ``step``, which writes in ``folder``: first check ``needed`` bytes are free
    there (if given); a full, read-only or over-quota disk is :class:`DiskTrouble`."""
    if needed:
        require_space(folder, step, needed)
    try:
        yield
    except OSError as exc:
        trouble = as_disk_trouble(exc, folder, step, needed)
        if trouble is None:
            raise
        raise trouble from None


def _existing(folder: Path) -> Path:
    """``folder`` or its nearest parent that exists (its disk is the one written to)."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _inside(folder: Path, root: Path) -> bool:
    try:
        return folder.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def human_size(count: int) -> str:
    """``count`` bytes as people read them: ``1.5 MB``."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
