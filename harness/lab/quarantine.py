"""Lab-wide quarantine: a place whose device failed its health check leaves the pool.

Opt-in per profile (``transport.labgrid.quarantine: lab``). Such a profile only
reserves places tagged ``et_health=ok`` (labgrid's reservations match a subset of a
place's tags, so a tag that must be present is the only way to leave a place out).
When the device of its acquired place fails a health check, the run sets that tag
to ``et_health=quarantined`` and the place's comment to who, when and why, the
operator's own comment kept after it (``[place comment: ...]``); every runner's
reservations then pass the place by, until a person looks at the device and clears it::

    et-harness lab quarantine -x COORDINATOR clear PLACE

which tags it ``et_health=ok`` again and gives the place its own comment back
(``et-harness lab quarantine list`` shows the places out of service). Without the
opt-in a failed check takes a pool's place out for the rest of the run only (and the
pool goes on on another), or quarantines a one-place device for the run
(:mod:`harness.farm.slot`).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from harness.lab.places import BadPlace, place_state
from harness.profiles.lab_setting import HEALTH_TAG, HEALTHY, QUARANTINED
from harness.results.infra import one_line
from harness.transport.base import DeviceUnavailable
from harness.untrusted.reading import printable

if TYPE_CHECKING:
    from harness.lab.client_session import LabSession
    from harness.lab.places import PlaceState

_REASON_LIMIT = 300
_RECORD = "quarantined by "  # how the harness's record begins
_KEPT = " [place comment: "  # what follows it: the operator's own comment, kept
OPERATOR_COMMENT_LIMIT = 600  # of the operator's comment a quarantine keeps
_READ_LIMIT = 2000  # of a place's comment: a record (< 500) and what it keeps


class PlaceQuarantined(DeviceUnavailable):
    """No place of the profile may be used: each is quarantined lab-wide or not in service."""


def about_the_device(error: BaseException) -> bool:
    """Whether a failed health check's error says the device is unwell, for every runner.
    Not an SSH host key missing from this runner's known_hosts: that is its own setup (a
    key the device changed, :class:`~harness.transport.ssh.HostKeyMismatch`, is the
    device's: a person must look)."""
    from harness.transport.ssh.setting_errors import HostKeyUnknown  # only once a place is held

    return not isinstance(error, HostKeyUnknown)


def health_of(state: PlaceState) -> str | None:
    """The place's ``et_health`` tag, or None."""
    return dict(state.tags).get(HEALTH_TAG)


def comment_for(
    who: str,
    place: str,
    reason: str,
    coordinator: str,
    now: datetime.datetime | None = None,
    kept: str = "",
) -> str:
    """The place comment a quarantine leaves: who, when (UTC), why, how to clear it, then
    ``kept``, the place's own comment before it (restored by :func:`clear`)."""
    when = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    why = printable(one_line(reason, _REASON_LIMIT))
    record = (
        f"{_RECORD}{who} at {when}: {why} "
        f"(clear: et-harness lab quarantine -x {coordinator} clear {place})"
    ).replace(_KEPT.strip(), "[place-comment:")  # the first marker is always the harness's
    return f"{record}{_KEPT}{kept}]" if kept else record


def operators_comment(comment: str) -> str:
    """The place's own comment within ``comment``: all of it unless it is a quarantine
    record, else the comment the record kept ("" if none)."""
    if not comment.startswith(_RECORD):
        return comment
    _, marker, kept = comment.partition(_KEPT)
    return kept.removesuffix("]") if marker else ""


def _comment_now(lab: LabSession, place: str) -> str:
    raws, _ = lab.snapshot()
    raw = next((r for r in raws if r.name == place), None)
    comment = raw.comment if raw is not None and isinstance(raw.comment, str) else ""
    return comment[:_READ_LIMIT]


def _set(lab: LabSession, place: str, tags: dict[str, str] | None, comment: str | None) -> None:
    messages = lab.messages()
    if comment is not None:
        request = messages.SetPlaceCommentRequest(placename=place, comment=comment)
        lab.call(f"set the comment of {place}", "SetPlaceComment", request)
    if tags is not None:
        request = messages.SetPlaceTagsRequest(placename=place, tags=tags)
        lab.call(f"set the tags of {place}", "SetPlaceTags", request)


def quarantine(lab: LabSession, place: str, reason: str) -> str:
    """Take ``place`` out of service lab-wide; the comment it got (the place's own comment
    kept after the record)."""
    kept = operators_comment(_comment_now(lab, place))[:OPERATOR_COMMENT_LIMIT]
    comment = comment_for(lab.identity.owner, place, reason, lab.coordinator, kept=kept)
    _set(lab, place, None, comment)  # first: the comment is there when another runner
    _set(lab, place, {HEALTH_TAG: QUARANTINED}, None)  # sees the tag
    return comment


def clear(lab: LabSession, place: str) -> str:
    """Put ``place`` back in service: ``et_health=ok``, its own comment back (a comment
    someone wrote since the quarantine is theirs, kept as it is); that comment."""
    restored = operators_comment(_comment_now(lab, place))
    _set(lab, place, {HEALTH_TAG: HEALTHY}, restored)
    return restored


def out_of_service(lab: LabSession) -> list[PlaceState]:
    """The places tagged ``et_health`` with anything but ``ok``, by name (a place whose
    data fails the value rules is left out: no run uses it either)."""
    raws, _ = lab.snapshot()
    found = []
    for raw in raws:
        try:
            state = place_state(raw, lab.coordinator)
        except BadPlace:
            continue
        if health_of(state) not in (None, HEALTHY):
            found.append(state)
    return sorted(found, key=lambda state: state.name)


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
