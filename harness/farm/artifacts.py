"""Crash artifacts: core files the device left after its agent died.

Kept modest on purpose. When a test's agent died (the link was lost), the
harness lists regular files named ``core`` or ``core.*`` directly in the
device's work directory, pulls each into the results directory and removes it
from the device, so that the next crash leaves new files. Whether a crash
writes a core file there is the device's business: its ``kernel.core_pattern``
must name a plain file (not a ``|`` pipe to a crash handler), the agent's core
limit must allow it and its working directory must be the work directory (an
``agent.wrapper`` such as ``[sh, -c, 'cd "$0" && ulimit -c unlimited && exec
"$@"', /tmp/et-harness/host]`` arranges the last two). Not collected: cores
piped to systemd-coredump or apport, tombstones on Android, anything from
devices without a shell (MCUs); the agent's stderr tail is kept for every
failure instead.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from harness.transport.base import Transport, TransportError

MAX_CORE_FILES = 3


def collect_core_files(transport: Transport, work_dir: str, dest: Path,
                       timeout: float) -> list[Path]:
    """Pull (and remove) core files from ``work_dir`` on the device into ``dest``.

    Returns the local paths. Device trouble while collecting is not an error of
    the test: what could not be collected is simply not there.
    """
    try:
        listed = transport.run(
            ["find", work_dir, "-maxdepth", "1", "-type", "f", "-name", "core*"],
            timeout=timeout,
        )
    except (TransportError, NotImplementedError):
        return []
    if listed.exit_code != 0:
        return []
    names = sorted(
        line for line in listed.stdout.decode("utf-8", "replace").splitlines()
        if _is_core_name(posixpath.basename(line))
    )
    pulled = []
    for remote in names[:MAX_CORE_FILES]:
        local = dest / posixpath.basename(remote)
        try:
            transport.pull(remote, local)
            transport.run(["rm", "-f", remote], timeout=timeout)
        except (TransportError, OSError):
            continue
        pulled.append(local)
    return pulled


def _is_core_name(name: str) -> bool:
    return name == "core" or (name.startswith("core.") and len(name) > len("core."))
