"""Spreading devices over pytest-xdist workers: all of one device's tests on one worker.

xdist's ``loadgroup`` mode sends tests of one ``xdist_group`` to one worker; the
plugin gives each device test the group of its device. Plain ``-n N`` means
``--dist load``, which is switched to ``loadgroup`` (tests without a device are
spread as before). Modes that split a group (``loadscope``, ``loadfile``,
``worksteal``, ``each``) would make workers queue for each other's devices, so
they are refused for device runs.
"""

from __future__ import annotations

_KEPT = ("no", "loadgroup")


class DistributionError(ValueError):
    """The requested xdist mode cannot keep each device on one worker."""


def distribution_mode(dist: str, device_run: bool) -> str:
    """The ``--dist`` mode to use instead of ``dist``."""
    if dist in _KEPT:
        return dist
    if dist == "load":
        return "loadgroup"
    if device_run:
        raise DistributionError(
            f"--dist {dist} would split a device's tests over several workers that then "
            "queue for the device; use -n N alone (or --dist loadgroup)"
        )
    return dist
