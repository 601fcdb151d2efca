"""Lab-wide quarantine: a place whose device failed its health check leaves the pool.

Opt-in per profile (``transport.labgrid.quarantine: lab``). Such a profile only
reserves places tagged ``et_health=ok`` (labgrid's reservations match a subset of a
place's tags, so a tag that must be present is the only way to leave a place out).
When the device of its acquired place fails a health check, the run sets that tag
to ``et_health=quarantined`` and the place's comment to who, when and why; every
runner's reservations then pass the place by, until a person looks at the device
and clears it::

    python -m harness.lab.quarantine -x COORDINATOR clear PLACE

(``labgrid-client -x COORDINATOR -p PLACE set-tags et_health=ok`` and
``set-comment ''`` by hand do the same). Without the opt-in a failed check takes a
pool's place out for the rest of the run only (and the pool goes on on another), or
quarantines a one-place device for the run (:mod:`harness.farm.slot`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import TYPE_CHECKING

from harness.lab.places import LabIdentity
from harness.results.infra import one_line
from harness.transport.base import DeviceUnavailable
from harness.untrusted.reading import printable

if TYPE_CHECKING:
    from harness.lab.places import PlaceState
    from harness.lab.session import LabSession

HEALTH_TAG = "et_health"
HEALTHY = "ok"
QUARANTINED = "quarantined"
MODES = ("run", "lab")  # how far a failed health check reaches
_REASON_LIMIT = 300


class PlaceQuarantined(DeviceUnavailable):
    """No place of the profile may be used: each is quarantined lab-wide or not in service."""


def about_the_device(error: BaseException) -> bool:
    """Whether a failed health check's error says the device is unwell, for every runner.
    Not an SSH host key missing from this runner's known_hosts: that is its own setup (a
    key the device changed, :class:`~harness.transport.ssh.HostKeyMismatch`, is the
    device's: a person must look)."""
    from harness.transport.ssh.errors import HostKeyUnknown  # only once a place is held

    return not isinstance(error, HostKeyUnknown)


def health_of(state: PlaceState) -> str | None:
    """The place's ``et_health`` tag, or None."""
    return dict(state.tags).get(HEALTH_TAG)


def comment_for(
    who: str, place: str, reason: str, coordinator: str, now: datetime.datetime | None = None
) -> str:
    """The place comment a quarantine leaves: who, when (UTC), why, and how to clear it."""
    when = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    why = printable(one_line(reason, _REASON_LIMIT))
    return (
        f"quarantined by {who} at {when}: {why} "
        f"(clear: python -m harness.lab.quarantine -x {coordinator} clear {place})"
    )


def _set(lab: LabSession, place: str, tags: dict[str, str] | None, comment: str | None) -> None:
    messages = lab.messages()
    if comment is not None:
        request = messages.SetPlaceCommentRequest(placename=place, comment=comment)
        lab.call(f"set the comment of {place}", "SetPlaceComment", request)
    if tags is not None:
        request = messages.SetPlaceTagsRequest(placename=place, tags=tags)
        lab.call(f"set the tags of {place}", "SetPlaceTags", request)


def quarantine(lab: LabSession, place: str, reason: str) -> str:
    """Take ``place`` out of service lab-wide; the comment it got."""
    comment = comment_for(lab.identity.owner, place, reason, lab.coordinator)
    _set(lab, place, None, comment)  # first: the comment is there when another runner
    _set(lab, place, {HEALTH_TAG: QUARANTINED}, None)  # sees the tag
    return comment


def clear(lab: LabSession, place: str) -> None:
    """Put ``place`` back in service: ``et_health=ok``, no comment."""
    _set(lab, place, {HEALTH_TAG: HEALTHY}, "")


def refuse_if_none_in_service(
    what: str, candidates: list[PlaceState], coordinator: str = "COORDINATOR"
) -> None:
    """:class:`PlaceQuarantined` when places match but none is tagged ``et_health=ok``:
    a reservation would only wait for its timeout."""
    if not candidates or any(health_of(state) == HEALTHY for state in candidates):
        return
    reasons = []
    for state in candidates:
        health = health_of(state)
        if health == QUARANTINED:
            reasons.append(f"{state.name}: {state.comment or 'quarantined (no comment)'}")
        else:
            reasons.append(
                f"{state.name}: not in service (tag {HEALTH_TAG}={health or '(none)'}"
                f"; a lab adds it with 'labgrid-client -x {coordinator} -p {state.name} set-tags "
                f"{HEALTH_TAG}={HEALTHY}')"
            )
    raise PlaceQuarantined(f"{what}: no place in service: {'; '.join(reasons)}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.lab.quarantine",
        description="clear a place's lab-wide quarantine",
    )
    parser.add_argument("-x", "--coordinator", help="host:port (default $LG_COORDINATOR)")
    parser.add_argument("action", choices=["clear"])
    parser.add_argument("place")
    args = parser.parse_args(argv)
    from harness.lab.session import LabgridError, LabSession

    coordinator = args.coordinator or os.environ.get("LG_COORDINATOR")
    lab = LabSession.of(coordinator, LabIdentity.this_process())
    try:
        clear(lab, args.place)
    except LabgridError as exc:
        print(f"cannot clear {args.place}: {exc}", file=sys.stderr)
        return 1
    print(f"{args.place}: {HEALTH_TAG}={HEALTHY}, comment cleared")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
