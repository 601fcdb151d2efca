"""A developer's own board: a place the user holds is theirs to run on (needs labgrid).

``labgrid-client -p board-e acquire`` makes the user (``HOST/USER``, labgrid's own
identity: ``$LG_HOSTNAME``/``$LG_USERNAME``, else the machine's name and the login user)
the place's holder. A run, ``send`` or ``doctor`` of a profile that asks for that place
(by name, or a pool whose tags it has) then uses it as it is, without reserving: the
place stays the user's when the command ends. Without such a place, the command
reserves one as a pytest run does (:class:`~harness.lab.reservation.LabgridReservation`)
and, for ``send`` and ``doctor``, hands it back when the command ends
(:func:`held_for_command`).
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from harness.lab.client_session import LabSession
from harness.lab.identity import LabIdentity
from harness.lab.reservation import HeldPlace, LabgridReservation, PlaceLost
from harness.lab.resources import with_lab_address
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.lab_setting import LabgridPlace, without_labgrid


def users_owner() -> str:
    """The user as labgrid's own client names a holder: ``HOST/USER``."""
    host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
    return f"{host}/{os.environ.get('LG_USERNAME') or getpass.getuser()}"


class OwnPlace(LabgridReservation):
    """A place the user holds, used as it is: nothing reserved, nothing released."""

    def __init__(self, wanted: LabgridPlace, name: str) -> None:
        super().__init__(wanted)
        self.name = name
        self.holder = users_owner()

    def acquire(self, timeout: float) -> HeldPlace:
        """The place with its resources as the user's acquisition opened them."""
        self.held = self._read_held(self.name, "", time.time(), time.monotonic() + timeout)
        return self.held

    def check_held(self) -> None:
        """:class:`PlaceLost` once the user no longer holds the place."""
        raws, _ = self.lab.snapshot()
        raw = next((r for r in raws if r.name == self.name), None)
        if raw is None or raw.acquired != self.holder:
            holder = "nobody" if raw is None or not raw.acquired else str(raw.acquired)
            raise PlaceLost(
                f"labgrid place {self.name!r} at {self.lab.coordinator} is no longer held by "
                f"{self.holder} (now: {holder}); acquire it again: 'labgrid-client -x "
                f"{self.lab.coordinator} -p {self.name} acquire'"
            )

    def release(self) -> None:
        """Leave the place with the user: only forget it."""
        self.held = None
        self.released_at = time.time()


def reservation_for(
    wanted: LabgridPlace, avoid: Mapping[str, str] | None = None, prefer: str | None = None
) -> LabgridReservation:
    """The user's own place that ``wanted`` asks for, if they hold one (the first by
    name) and this run has not taken it out (``avoid``), else a reservation of the lab's
    places that avoids those and prefers ``prefer``."""
    holder = users_owner()
    raws, _ = LabSession.of(wanted.coordinator, LabIdentity.this_process()).snapshot()
    mine = sorted(
        raw.name
        for raw in raws
        if raw.acquired == holder
        and raw.name not in (avoid or {})
        and wanted.asks_for(raw.name, dict(raw.tags))
    )
    if mine:
        return OwnPlace(wanted, mine[0])
    return LabgridReservation(wanted, avoid=avoid, prefer=prefer)


@contextmanager
def held_for_command(
    profile: DeviceProfile, wanted: LabgridPlace, timeout: float
) -> Iterator[tuple[DeviceProfile, Callable[[], None] | None]]:
    """For a command that brings one device up (``send``, ``doctor``): the place lab
    profile ``profile`` asks for (``wanted``) held for the length of the block (the user's
    own, else reserved within ``timeout`` s and handed back after), as the profile with the
    place's address and the board's outside reset (or None)."""
    reservation = reservation_for(wanted)
    try:
        held = reservation.acquire(timeout)
        board_reset = reservation.power_cycle if wanted.reset == "power" else None
        yield with_lab_address(without_labgrid(profile), held.resources, held.name), board_reset
    finally:
        reservation.release()
