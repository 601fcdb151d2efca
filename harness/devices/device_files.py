"""The user programs a hosted device keeps: bounded in size, the least recently used
removed first.

A user's program is pushed to ``<work_dir>/programs/user-<hash>.pte`` (named by its
content, so a device that has it is not sent it again). Each use marks it (its
modification time); after each, the device's user programs beyond the bound are
removed, oldest first, never the one in use. Every step is one argv command through the
transport (``touch``, ``find ... -exec stat``, ``rm``), which GNU, BusyBox and Android's
toybox all have.
"""

from __future__ import annotations

import posixpath

from harness.transport.base import Transport, TransportError

USER_PROGRAM_PREFIX = "user-"
# A device's storage is not the harness's to fill: a few dozen models of ordinary size.
USER_PROGRAMS_BOUND = 256 << 20


def keep_bounded(transport: Transport, in_use: str, bound: int, timeout: float) -> list[str]:
    """Mark ``in_use`` used now, then remove the least recently used user programs beside
    it until they take at most ``bound`` bytes; returns the paths removed."""
    done = transport.run(["touch", "-c", "--", in_use], timeout=timeout)
    if done.exit_code != 0:
        raise TransportError(f"touch {in_use} failed: {done.stderr.decode(errors='replace')}")
    folder = posixpath.dirname(in_use)
    listed = transport.run(
        ["find", folder, "-maxdepth", "1", "-type", "f", "-name", f"{USER_PROGRAM_PREFIX}*.pte",
         "-exec", "stat", "-c", "%Y %s %n", "{}", "+"],
        timeout=timeout,
    )  # fmt: skip
    programs = []
    for line in listed.stdout.decode(errors="replace").splitlines():
        used, length, path = [*line.split(" ", 2), "", ""][:3]
        if used.isdigit() and length.isdigit() and posixpath.dirname(path) == folder:
            programs.append((int(used), path, int(length)))
    total = sum(size for _, _, size in programs)
    removed = []
    for _, path, size in sorted(programs):
        if total <= bound:
            break
        if path != in_use:
            removed.append(path)
            total -= size
    if removed:
        transport.run(["rm", "-f", "--", *removed], timeout=timeout)
    return removed
