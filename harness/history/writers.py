"""Who writes a run: this process, named so that a reader can tell whether it still lives.

A run's ``writer`` is ``HOST BOOT PID START`` (the boot id and the process's start
time make a PID unique). A run still marked running whose writer was on this host
and is gone (SIGKILLed, the machine rebooted) is incomplete; a writer on another
host is left to that host's next run or reader.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable

from harness.lifecycle.reap import boot_id, start_time


def this_writer() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()} {boot_id()} {pid} {start_time(pid)}"


def dead_writers(writers: Iterable[str]) -> list[str]:
    """Those of ``writers`` known to be gone: on this host, another boot or a dead process."""
    host, boot = socket.gethostname(), boot_id()
    dead = []
    for writer in writers:
        parts = writer.split(" ")
        if len(parts) != 4 or parts[0] != host:
            continue
        _, their_boot, pid, start = parts
        if their_boot != boot or not pid.isdecimal() or str(start_time(int(pid))) != start:
            dead.append(writer)
    return dead
