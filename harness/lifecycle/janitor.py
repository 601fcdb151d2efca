"""``python -m harness.lifecycle.janitor DIR OWNER``: reap OWNER's record once OWNER is gone.

Started by :class:`harness.lifecycle.owner.Owner` with its stdin on a pipe only the
owner holds, in a session of its own (so a signal to the owner's process group or
terminal does not reach it). End of input means the owner has exited or was killed;
the janitor then waits for the owner's lock (released when its last holder is gone),
reaps what the record names, removes the record and exits.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
from pathlib import Path

from harness.lifecycle.reap import OwnerRecord, reap


def main(argv: list[str]) -> int:
    directory, owner = Path(argv[0]), argv[1]
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # only the owner's end ends the watch
    while os.read(0, 4096):
        pass
    lock_path = directory / f"{owner}.lock"
    record_path = directory / f"{owner}.json"
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        return 0  # reaped already (by a sweep)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        record = OwnerRecord.from_json(record_path.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        record = None  # reaped already by a sweep, or unreadable
    if record is not None:
        reap(record)
    for leftover in (record_path, record_path.with_suffix(".tmp"), lock_path):
        leftover.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
