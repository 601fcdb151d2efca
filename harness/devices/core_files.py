"""Core files an agent left in a hosted device's work directory (:mod:`harness.results.artifacts`).

Regular files named ``core`` or ``core.*`` directly in the work directory are
pulled and removed from the device, so that the next crash leaves new files.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from harness.transport.base import Transport, TransportError

MAX_CORE_FILES = 3


def collect_core_files(
    transport: Transport, work_dir: str, dest: Path, timeout: float
) -> list[Path]:
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
        line
        for line in listed.stdout.decode("utf-8", "replace").splitlines()
        if _is_core_name(posixpath.basename(line))
    )
    pulled = []
    for remote in names[:MAX_CORE_FILES]:
        local = dest / posixpath.basename(remote)
        if local.exists():
            continue
        try:
            transport.pull(remote, local)
            transport.run(["rm", "-f", remote], timeout=timeout)
        except (TransportError, OSError):
            continue
        pulled.append(local)
    return pulled


def _is_core_name(name: str) -> bool:
    return name == "core" or (name.startswith("core.") and len(name) > len("core."))
