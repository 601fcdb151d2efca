"""The chaos run's small results disk: a tmpfs that a fault can fill in a moment.

The rounds write their results on it; each round's folder is moved to the run's folder
once the round has ended, and the disk is unmounted at the end. Mounting needs root (as
ssh-emu does); without it the run has no disk and plans no disk fault.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.errors import InfrastructureError
from harness.lifecycle import process

DISK_BYTES = 64 << 20
_MOUNT_TIMEOUT_S = 30.0


class ResultsDiskError(RuntimeError, InfrastructureError):
    """The small results disk could not be mounted or unmounted."""


def can_mount() -> bool:
    """Whether this process may mount a tmpfs (it is root, and ``mount`` is there)."""
    return os.geteuid() == 0 and shutil.which("mount") is not None


def _mount(argv: list[str], what: str) -> None:
    done = process.run(argv, timeout=_MOUNT_TIMEOUT_S)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()
        raise ResultsDiskError(f"cannot {what}: `{' '.join(argv)}` said: {said}")


@contextmanager
def results_disk(place: Path, size: int = DISK_BYTES) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes mounted at ``place`` for the block, then unmounted."""
    place.mkdir(parents=True, exist_ok=True)
    _mount(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(place)],
        f"mount a {size}-byte tmpfs at {place} (run as root, or without disk faults)",
    )
    try:
        yield place
    finally:
        _mount(["umount", "-l", str(place)], f"unmount {place}")
        place.rmdir()


def move_out(folder: Path, destination: Path) -> None:
    """``folder`` (a round's results on the disk) moved to ``destination``."""
    if folder.exists():
        shutil.copytree(folder, destination, dirs_exist_ok=True)
        shutil.rmtree(folder)
