"""A device slot's labgrid place beyond holding it: out of service lab-wide, handed back.

:func:`quarantine_lab_wide` tags the held place ``et_health=quarantined`` with who, when
and why (``labgrid.quarantine: lab``, :mod:`harness.lab.quarantine`); :func:`hand_back`
releases it and records the holding (:mod:`harness.results.lab_holdings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.lab import quarantine as lab_quarantine
from harness.results import lab_holdings
from harness.transport.base import TransportError

if TYPE_CHECKING:
    from harness.lab.reservation import LabgridReservation


def quarantine_lab_wide(
    reservation: LabgridReservation, device: str, error: BaseException, reason: str
) -> str:
    """With ``labgrid.quarantine: lab``, take the held place out of service lab-wide
    (unless ``error`` is this runner's own trouble, such as a key it lacks); what to add
    to the reason."""
    held = reservation.held
    if (
        held is None
        or reservation.wanted.quarantine != "lab"
        or not lab_quarantine.about_the_device(error)
    ):
        return ""
    try:
        reservation.check_held()
    except TransportError:  # lost, or the coordinator is gone: not the device's fault
        return f"; labgrid place {held.name} not quarantined lab-wide: no longer held"
    try:
        comment = reservation.quarantine(f"device {device!r}: {reason}")
    except TransportError as exc:
        return f"; labgrid place {held.name} could not be quarantined lab-wide: {exc}"
    return f"; labgrid place {held.name} quarantined lab-wide ({comment})"


def hand_back(reservation: LabgridReservation, device: str, results_dir: Path | None) -> None:
    """Release the place; record the holding in ``results_dir`` (if known)."""
    held = reservation.held
    reservation.release()
    if held is not None and results_dir is not None:
        lab_holdings.record(
            results_dir,
            {
                "device": device,
                "place": held.name,
                "coordinator": reservation.lab.coordinator,
                "holder": reservation.lab.identity.owner,
                "reservation": held.reservation,
                "acquired_at": round(held.acquired_at, 3),
                "released_at": round(reservation.released_at or 0.0, 3),
            },
        )
