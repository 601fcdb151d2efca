"""What a hosted device keeps of the harness's: bounded, the least recently used removed
first.

A user's program is pushed to ``<work_dir>/programs/user-<hash>.pte`` (with its inputs
file beside it, ``user-<hash>.pte.inputs``, removed with it) and an agent build
to ``<work_dir>/agent/<hash>/`` (named by their content, so a device that has one is not
sent it again). Each use marks it (its modification time); after each, what is beyond the
bound is removed, oldest first, never the one in use: user programs beyond
:data:`USER_PROGRAMS_BOUND` bytes, agent builds beyond :data:`AGENT_BUILDS_KEPT` unused
for a day. Every
step is one argv command through the transport (``touch``, ``find ... -exec stat``,
``rm``), which GNU, BusyBox and Android's toybox all have.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from harness.transport.base import (
    DeviceUnavailable,
    Transport,
    TransportError,
    TransportLost,
    TransportTimeout,
)

USER_PROGRAM_PREFIX = "user-"
INPUTS_SUFFIX = ".inputs"  # a program's inputs file beside it (docs/agent.md, "Given inputs")
# A device's storage is not the harness's to fill: a few dozen models of ordinary size.
USER_PROGRAMS_BOUND = 256 << 20
# The build in use and the two before it (a bisect goes back and forth between a few),
# and any used within a day: another run may use it now (a test's own lock directory
# does not keep it off the device).
AGENT_BUILDS_KEPT = 3
AGENT_BUILD_IDLE_S = 24 * 3600


def keep_bounded(transport: Transport, in_use: str, bound: int, timeout: float) -> list[str]:
    """Mark the user program ``in_use`` used now, then remove the least recently used user
    programs beside it until they take at most ``bound`` bytes; the paths removed."""
    programs = _by_last_use(
        transport, in_use, ["-type", "f", "-name", f"{USER_PROGRAM_PREFIX}*.pte"], timeout
    )
    total = sum(size for _, _, size in programs)
    removed = []
    for _, path, size in programs:
        if total <= bound:
            break
        if path != in_use:
            removed.append(path)
            total -= size
    if removed:
        beside = [path + INPUTS_SUFFIX for path in removed]
        transport.run(["rm", "-f", "--", *removed, *beside], timeout=timeout)
    return removed


def keep_latest(
    transport: Transport, in_use: str, count: int, timeout: float, idle: float = AGENT_BUILD_IDLE_S
) -> list[str]:
    """Mark the agent build folder ``in_use`` used now, then remove those beside it beyond
    the ``count`` most recently used that nobody used for ``idle`` seconds (by the
    device's clock); the paths removed."""
    builds = _by_last_use(transport, in_use, ["-type", "d"], timeout)
    now = max(used for used, _, _ in builds) if builds else 0
    removed = [
        path
        for used, path, _ in builds[: max(0, len(builds) - count)]
        if path != in_use and now - used > idle
    ]
    if removed:
        transport.run(["rm", "-rf", "--", *removed], timeout=timeout)
    return removed


def _by_last_use(
    transport: Transport, in_use: str, kind: Sequence[str], timeout: float
) -> list[tuple[int, str, int]]:
    """``in_use`` marked used, then it and what ``kind`` finds beside it, least recently
    used first: (last use in seconds since the epoch, path, size in bytes); nothing when
    the device cannot say."""
    try:
        marked = transport.run(["touch", "-c", "--", in_use], timeout=timeout)
    except (TransportLost, TransportTimeout, DeviceUnavailable):
        raise  # the link itself: the device's trouble, not housekeeping's
    except TransportError:
        return []  # housekeeping: a device without these tools keeps what it has
    if marked.exit_code != 0:
        return []
    folder = posixpath.dirname(in_use)
    listed = transport.run(
        ["find", folder, "-mindepth", "1", "-maxdepth", "1", *kind,
         "-exec", "stat", "-c", "%Y %s %n", "{}", "+"],
        timeout=timeout,
    )  # fmt: skip
    found = []
    for line in listed.stdout.decode(errors="replace").splitlines():
        used, length, path = [*line.split(" ", 2), "", ""][:3]
        if used.isdecimal() and length.isdecimal() and posixpath.dirname(path) == folder:
            found.append((int(used), path, int(length)))
    return sorted(found)
