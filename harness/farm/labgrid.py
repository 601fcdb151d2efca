"""Reserving and locking a labgrid place for a device (optional; needs labgrid installed).

A profile names its place in its transport settings::

    transport:
      kind: ssh
      host: board-7.lab
      labgrid: {place: board-7, coordinator: "coordinator.lab:20408"}

Before the device is used, the harness reserves the place through labgrid's own
client (``labgrid-client reserve --shell name=PLACE``), waits for the
reservation (``wait TOKEN``) at most the lock timeout, and acquires the place
(``-p +TOKEN acquire``); afterwards it releases the place and cancels the
reservation. labgrid is an optional dependency: only profiles that name a place
need it, and they fail with a clear message when ``labgrid-client`` is missing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.profile import DeviceProfile, ProfileError
from harness.transport.base import DeviceUnavailable
from harness.value_rules import ValueRuleError, check_word, split_host_port

SETTING = "labgrid"
CLIENT = "labgrid-client"
_COMMAND_TIMEOUT_S = 60.0
_TOKEN = re.compile(r"LG_TOKEN=([A-Za-z0-9_-]+)")


class LabgridNotInstalled(ProfileError):
    """The profile names a labgrid place but labgrid's client is not installed here."""


class LabgridError(DeviceUnavailable):
    """labgrid's client failed, or the place was not allocated in time."""


@dataclass(frozen=True)
class LabgridPlace:
    """The labgrid place a device sits in, and the coordinator that manages it."""

    place: str
    coordinator: str | None = None  # None: labgrid's default ($LG_COORDINATOR)

    @classmethod
    def of(cls, profile: DeviceProfile) -> LabgridPlace | None:
        """The place ``profile`` names under ``transport.labgrid``, or None."""
        data = profile.settings.get(SETTING)
        if data is None:
            return None
        where = profile.where(f"transport.{SETTING}")
        if not isinstance(data, Mapping):
            raise ProfileError(
                f"{where}: must be a mapping with 'place' and optional 'coordinator'"
            )
        unknown = sorted(set(data) - {"place", "coordinator"})
        if unknown:
            raise ProfileError(f"{where}.{unknown[0]}: unknown field; allowed: coordinator, place")
        place, coordinator = data.get("place"), data.get("coordinator")
        if not isinstance(place, str) or not place:
            raise ProfileError(f"{where}.place: required, the labgrid place's name")
        if coordinator is not None and not isinstance(coordinator, str):
            raise ProfileError(f"{where}.coordinator: must be a string like 'host:20408'")
        try:
            check_word(place, "the labgrid place's name")
        except ValueRuleError as exc:
            raise ProfileError(f"{where}.place: {exc}") from None
        try:
            if coordinator is not None:
                split_host_port(coordinator)
        except ValueRuleError as exc:
            raise ProfileError(f"{where}.coordinator: {exc}") from None
        return cls(place, coordinator)


def without_labgrid(profile: DeviceProfile) -> DeviceProfile:
    """``profile`` minus its labgrid setting: what the transport itself is given."""
    if SETTING not in profile.settings:
        return profile
    settings = {k: v for k, v in profile.settings.items() if k != SETTING}
    return dataclasses.replace(profile, settings=settings)


def find_client(profile: DeviceProfile, search_path: str | None = None) -> str:
    """Path of ``labgrid-client`` (on PATH or beside this Python); :class:`LabgridNotInstalled`."""
    path = search_path if search_path is not None else os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    )
    found = shutil.which(CLIENT, path=path)
    if found is None:
        raise LabgridNotInstalled(
            f"{profile.where('transport.' + SETTING)}: the profile names a labgrid place but "
            f"{CLIENT} is not installed here; install labgrid ('pip install labgrid') on this "
            "machine, or use a profile without the labgrid setting"
        )
    return found


class LabgridReservation:
    """One reservation of one place, through ``labgrid-client`` commands (argv lists)."""

    def __init__(self, place: LabgridPlace, client: str) -> None:
        self.place = place
        self.client = client
        self.token: str | None = None
        self.acquired = False

    def _base(self) -> list[str]:
        coordinator = ["-x", self.place.coordinator] if self.place.coordinator else []
        return [self.client, *coordinator]

    def reserve_command(self) -> list[str]:
        return [*self._base(), "reserve", "--shell", f"name={self.place.place}"]

    def wait_command(self, token: str) -> list[str]:
        return [*self._base(), "wait", token]

    def acquire_command(self, token: str) -> list[str]:
        return [*self._base(), "-p", f"+{token}", "acquire"]

    def release_command(self, token: str) -> list[str]:
        return [*self._base(), "-p", f"+{token}", "release"]

    def cancel_command(self, token: str) -> list[str]:
        return [*self._base(), "cancel-reservation", token]

    def acquire(self, timeout: float) -> None:
        """Reserve the place, wait up to ``timeout`` s for it, then acquire (lock) it."""
        output = self._run(self.reserve_command(), _COMMAND_TIMEOUT_S)
        match = _TOKEN.search(output)
        if match is None:
            raise LabgridError(
                f"labgrid place {self.place.place!r}: '{CLIENT} reserve' printed no LG_TOKEN: "
                f"{output.strip()[:200]!r}"
            )
        self.token = match.group(1)
        try:
            self._run(self.wait_command(self.token), timeout)
            self._run(self.acquire_command(self.token), _COMMAND_TIMEOUT_S)
        except LabgridError:
            self.release()
            raise
        self.acquired = True

    def release(self) -> None:
        """Release the place (if acquired) and cancel the reservation; safe to call twice."""
        token, self.token = self.token, None
        if token is None:
            return
        try:
            if self.acquired:
                self.acquired = False
                self._run(self.release_command(token), _COMMAND_TIMEOUT_S)
        finally:
            self._run(self.cancel_command(token), _COMMAND_TIMEOUT_S)

    def _run(self, argv: Sequence[str], timeout: float) -> str:
        try:
            done = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise LabgridError(
                f"labgrid place {self.place.place!r}: '{' '.join(argv[1:])}' did not finish "
                f"within {timeout:.1f} s (the place is busy; raise --lock-timeout or free it)"
            ) from None
        except OSError as exc:
            raise LabgridError(f"labgrid: cannot run {argv[0]}: {exc}") from None
        if done.returncode != 0:
            raise LabgridError(
                f"labgrid place {self.place.place!r}: '{' '.join(argv[1:])}' failed with exit "
                f"code {done.returncode}: {done.stderr.strip()[-500:]}"
            )
        return done.stdout
