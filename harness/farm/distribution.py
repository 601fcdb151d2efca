"""Spreading devices over pytest-xdist workers: all of one device's tests on one worker.

With ``-n N`` the plugin gives xdist :class:`DeviceScheduling`: xdist's
scope-based scheduler with each device's tests as one scope, so that one worker
holds a device for all its tests while other workers run other devices; tests
without a device are spread one by one. A *pool* (a lab profile that asks for any
place with some labgrid tags) is many devices of one kind: its tests are handed out
one by one as workers free up (xdist's ``load``), so up to N workers use the pool at
once, each on a place of its own (:mod:`harness.profiles.lab_setting`), and a slow board or one
left for another (:mod:`harness.farm.slot`) does not hold tests back. (xdist's own
``loadgroup`` mode cannot be used: with pytest 9.2 it silently stops grouping,
pytest-xdist issue #1386.)
Modes that split a device's tests on purpose (``loadscope``, ``loadfile``,
``worksteal``, ``each``) would make workers queue for each other's devices, so
they are refused for device runs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest
from xdist.scheduler import LoadScopeScheduling

from harness.errors import UsageError

GROUPED_MODES = ("load", "loadgroup")  # served by DeviceScheduling
_DEVICE_SCOPE = "device:"


class DistributionError(ValueError, UsageError):
    """The requested xdist mode cannot keep each device on one worker."""


def check_distribution_mode(dist: str, device_run: bool) -> None:
    """Raise :class:`DistributionError` if ``--dist`` would split devices over workers."""
    if device_run and dist not in ("no", *GROUPED_MODES):
        raise DistributionError(
            f"--dist {dist} would split a device's tests over several workers that then "
            "queue for the device; use -n N alone (or --dist load)"
        )


def device_of_nodeid(nodeid: str, devices: Sequence[str]) -> str | None:
    """The device a test id names first in its parameters (``test_x[host-a-2]`` -> host-a).

    When one device name continues another (``host``, ``host-a``) the longest
    matching name wins.
    """
    start = nodeid.find("[")
    if start < 0 or not nodeid.endswith("]"):
        return None
    params = nodeid[start + 1 : -1]
    found = [d for d in devices if params == d or params.startswith(f"{d}-")]
    return max(found, key=len) if found else None


def work_unit(nodeid: str, devices: Sequence[str], pools: Collection[str]) -> str:
    """The scope xdist hands out whole: a device's tests, or one test (of a pool, or
    without a device)."""
    device = device_of_nodeid(nodeid, devices)
    if device is None or device in pools:
        return nodeid
    return _DEVICE_SCOPE + device


class DeviceScheduling(LoadScopeScheduling):
    """xdist scheduling with one work unit per device (and one per test without a
    device, or of a pool)."""

    def __init__(
        self, config: pytest.Config, devices: Sequence[str], log=None, pools: Collection[str] = ()
    ) -> None:
        super().__init__(config, log)
        self.devices = tuple(devices)
        self.pools = frozenset(pools)

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid, self.devices, self.pools)
