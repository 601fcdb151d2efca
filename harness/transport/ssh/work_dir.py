"""A board's work directory that only the login user (and root) can change, over SFTP.

The agent runs out of ``work_dir`` and loads libraries from its own directory, so a
directory on that path that another user of the board can write is a way to run code
as the login user (another user could make ``/tmp/et-harness`` first, mode 0777, and
swap the agent after it is pushed). Each component is checked as on this machine
(:mod:`harness.transport.private_dir`, like OpenSSH's ``StrictModes``): the path as
given and the path its links resolve to; components the harness makes are mode 0700.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import paramiko

from harness.transport.private_dir import UnsafeDirectoryError, check_component, components


def ensure_private_work_dir(sftp: paramiko.SFTPClient, work_dir: str, uid: int, what: str) -> None:
    """Make ``work_dir`` (missing parts mode 0700) after checking every existing component
    against the login user's ``uid``; ``what`` names the setting in errors."""
    path = PurePosixPath(work_dir)
    if not path.is_absolute():
        raise UnsafeDirectoryError(f"{what}: {work_dir} is not an absolute path")
    for part in components(path):
        try:
            info = sftp.lstat(str(part))
        except FileNotFoundError:
            try:
                sftp.mkdir(str(part), 0o700)
            except OSError:
                pass  # made meanwhile (by another run, or not): checked below
            info = sftp.lstat(str(part))
        check_component(part, info, uid, what, part == path)
    resolved = PurePosixPath(sftp.normalize(work_dir))
    for part in components(resolved):
        check_component(part, sftp.lstat(str(part)), uid, what, part == resolved)
