"""Holding a labgrid place for a device: reserve, wait, acquire, hand over (needs labgrid).

A profile describes a kind of device; the lab's places are its instances. The
profile names a coordinator and either one place or a tag filter (a pool)::

    transport:
      kind: serial                       # or ssh, adb
      labgrid:
        coordinator: "127.0.0.1:20408"   # optional: else $LG_COORDINATOR
        tags: {kind: mcu, pool: lab}     # any free place with these tags ...
        # place: board-7                 # ... or this one place
        reset: power                     # optional (serial): power-cycle the place's power
                                         # port before each agent session (a fresh registry)
        recover: power                   # optional (ssh): a board that stops answering is
                                         # power-cycled and waited for while it boots
        quarantine: lab                  # optional: a failed health check takes the
                                         # place out of service lab-wide (lab_quarantine)

The harness talks to the coordinator through labgrid's own client session, in
process (:mod:`harness.lab.client_session`). Before reserving, it checks every place
that would match (:func:`~harness.lab.places.place_state`, and its resources
by :func:`~harness.lab.resources.read_resources`): a place that fails is left
out with one warning naming it and the field, and is never chosen. Reservations name
one place each (filter ``name=PLACE`` plus the profile's tags), so a bad place can
never be allocated: one for a free place if there is one; with none free, one per
usable place, so the coordinator's own queue decides who is next on each place. The
first place allocated is acquired, the other reservations are cancelled at once. The
coordinator streams each allocation to the session, so the waiting runner acquires as
soon as a place is handed to it. Hand-over cancels
the reservation first and then releases the place: the other order leaves the
place allocated to a cancelled token until the coordinator's next 15 s scheduling
pass.

Every process is its own labgrid owner, ``HOST/USER-pidPID-START`` (START is the
process's start time, which guards against PID reuse), so two xdist workers are
two owners and a run's holdings say which process holds them. The coordinator
never expires an acquired place, so a run that dies holding one hands it back twice
over: its janitor (:mod:`harness.lifecycle.janitor`, which outlives a ``kill -9``)
runs the same hand-over (:mod:`harness.lab.handback`); and before reserving, a
run releases (and cancels the reservations of) every place acquired by an identity of
this host whose process is gone, for when the janitor died too.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from harness.extras import LAB
from harness.profiles.device_profile import DeviceProfile, ProfileError
from harness.profiles.kinds import DeviceKind, all_kinds, device_kind
from harness.untrusted.value_rules import ValueRuleError, check_word, split_host_port

SETTING = "labgrid"
# A place's health tag in the lab (harness.lab.quarantine): what a lab-wide quarantine sets.
HEALTH_TAG = "et_health"
HEALTHY = "ok"
QUARANTINED = "quarantined"
MODES = ("run", "lab")  # how far a failed health check reaches
_TAG = re.compile(r"[a-z][a-z0-9_]{0,63}")  # labgrid's own tag key rule, bounded
_TAG_VALUE = re.compile(r"[a-z0-9_]{1,64}")  # labgrid's own tag value rule, bounded
_POWER_USES = ("none", "power")  # reset and recover
_FIELDS = ("coordinator", "place", "quarantine", "recover", "reset", "tags")


class LabgridNotInstalled(ProfileError):
    """The profile names a labgrid place but labgrid's client is not installed here."""


@dataclass(frozen=True)
class LabgridPlace:
    """What a profile asks of the lab: one place by name, or any place with ``tags``."""

    place: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    coordinator: str | None = None  # None: labgrid's default ($LG_COORDINATOR)
    reset: str = "none"
    quarantine: str = "run"  # "lab": a failed health check quarantines the place lab-wide
    recover: str = "none"  # "power": a board that stops answering is power-cycled, waited for

    @property
    def filters(self) -> dict[str, str]:
        """The tags a place must have (a reservation's filter, besides its ``name``); with
        lab-wide quarantine, only places in service (``et_health=ok``)."""
        wanted = dict(self.tags)
        if self.quarantine == "lab":
            wanted[HEALTH_TAG] = HEALTHY
        return wanted

    def asks_for(self, name: str, tags: Mapping[object, object]) -> bool:
        """Whether a place of this name and these tags (unchecked) is one this asks for."""
        if self.place is not None:
            return name == self.place
        return all(tags.get(key) == value for key, value in self.tags)

    @property
    def what(self) -> str:
        """``place 'board-7'`` or ``a place with tags kind=mcu pool=lab``, for messages."""
        if self.place is not None:
            return f"labgrid place {self.place!r}"
        return f"a labgrid place with tags {' '.join(f'{k}={v}' for k, v in self.tags)}"

    @classmethod
    def of(cls, profile: DeviceProfile) -> LabgridPlace | None:
        """What ``profile`` asks for under ``transport.labgrid``, or None."""
        data = profile.settings.get(SETTING)
        if data is None:
            return None
        where = profile.where(f"transport.{SETTING}")
        if not isinstance(data, Mapping):
            raise ProfileError(f"{where}: must be a mapping with 'place' or 'tags'")
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            allowed = ", ".join(_FIELDS)
            raise ProfileError(f"{where}.{unknown[0]}: unknown field; allowed: {allowed}")
        if ("place" in data) == ("tags" in data):
            raise ProfileError(
                f"{where}: give exactly one of 'place' (a place's name) or 'tags' (a mapping "
                "such as {kind: mcu, pool: lab}: any free place with those tags)"
            )
        place = data.get("place")
        if place is not None:
            try:
                check_word(place, "the labgrid place's name")
            except ValueRuleError as exc:
                raise ProfileError(f"{where}.place: {exc}") from None
        tags = _tags(data.get("tags"), f"{where}.tags") if "tags" in data else ()
        coordinator = data.get("coordinator")
        if coordinator is not None:
            try:
                split_host_port(coordinator)
            except ValueRuleError as exc:
                raise ProfileError(f"{where}.coordinator: {exc}") from None
        reset = _power_use(
            profile, data, "reset", "cycle the place's power port before each agent session",
            lambda kind: kind.takes_outside_reset,
            "a {kind} device is not reset from outside (only transport.kind {able} is)",
        )  # fmt: skip
        recover = _power_use(
            profile, data, "recover", "a board that stops answering is power-cycled through "
            "the place's power port and waited for while it boots",
            lambda kind: kind.awaits_boot,
            "the harness does not wait for a {kind} device to boot (only for transport.kind "
            "{able})",
        )  # fmt: skip
        quarantine = data.get("quarantine", "run")
        if quarantine not in MODES:
            raise ProfileError(
                f"{where}.quarantine: {quarantine!r} is not one of "
                f"{', '.join(MODES)} (lab: a failed health check tags the place "
                f"{HEALTH_TAG}={QUARANTINED} for every runner)"
            )
        return cls(place, tags, coordinator, reset, quarantine, recover)


def _power_use(
    profile: DeviceProfile,
    data: Mapping[str, object],
    field: str,
    means: str,
    kind_can: Callable[[DeviceKind], bool],
    refusal: str,
) -> str:
    """The labgrid block's ``field`` (``reset``, ``recover``): ``none``, or ``power``
    (``means`` what it does), which a kind ``kind_can`` not is refused for (``refusal``,
    given ``{kind}`` and ``{able}``, says why)."""
    where = profile.where(f"transport.{SETTING}.{field}")
    value = data.get(field, "none")
    if value not in _POWER_USES:
        raise ProfileError(
            f"{where}: {value!r} is not one of {', '.join(_POWER_USES)} (power: {means})"
        )
    if value != "none" and not kind_can(device_kind(profile.kind)):
        able = ", ".join(k.name for k in all_kinds() if kind_can(k))
        why = refusal.format(kind=profile.kind, able=able)
        raise ProfileError(f"{where}: {value}, but {why}: remove the field")
    return str(value)


def _tags(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping) or not value:
        raise ProfileError(f"{where}: must be a non-empty mapping of tag: value")
    if len(value) > 16:
        raise ProfileError(f"{where}: at most 16 tags; got {len(value)}")
    pairs = []
    for key, tag_value in value.items():
        text = (
            str(tag_value)
            if isinstance(tag_value, int) and not isinstance(tag_value, bool)
            else tag_value
        )
        if not isinstance(key, str) or not _TAG.fullmatch(key):
            raise ProfileError(f"{where}: tag {key!r} is not a labgrid tag name ([a-z][a-z0-9_]*)")
        if not isinstance(text, str) or not _TAG_VALUE.fullmatch(text):
            raise ProfileError(
                f"{where}.{key}: {tag_value!r} is not a labgrid tag value ([a-z0-9_]+)"
            )
        pairs.append((key, text))
    return tuple(sorted(pairs))


def pool_names(profiles: Iterable[DeviceProfile]) -> list[str]:
    """The profiles that are pools: they ask for any place with some tags, not one place."""
    return [
        profile.name
        for profile in profiles
        if (wanted := LabgridPlace.of(profile)) is not None and wanted.place is None
    ]


def without_labgrid(profile: DeviceProfile) -> DeviceProfile:
    """``profile`` minus its labgrid setting: what the transport itself is given."""
    if SETTING not in profile.settings:
        return profile
    settings = {k: v for k, v in profile.settings.items() if k != SETTING}
    return dataclasses.replace(profile, settings=settings)


def for_transport_checks(profile: DeviceProfile) -> DeviceProfile:
    """What the transport's own checks see of ``profile``: without its labgrid setting and,
    for a lab profile, with stand-ins for the address the acquired place will give."""
    if LabgridPlace.of(profile) is None:
        return profile
    return check_lab_profile(without_labgrid(profile))


def require_labgrid(profile: DeviceProfile) -> None:
    """:class:`LabgridNotInstalled` unless the ``[lab]`` extra is installed here."""
    missing = LAB.missing("a labgrid place")
    if missing is not None:
        raise LabgridNotInstalled(
            f"{profile.where('transport.' + SETTING)}: {missing}; or use a profile without "
            "the labgrid setting"
        )


def check_lab_profile(profile: DeviceProfile) -> DeviceProfile:
    """A lab profile with stand-in values for the fields the lab fills, for the transport's
    own checks of the rest; :class:`ProfileError` if the profile sets one of them itself."""
    lab = device_kind(profile.kind).lab
    if lab is None:
        return profile  # the place is only held (a host-attached device): nothing to fill
    given = sorted(set(profile.settings) & set(lab.fields))
    if given:
        raise ProfileError(
            f"{profile.where('transport.' + given[0])}: comes from the acquired labgrid place "
            f"({', '.join(lab.fields)} are the lab's); remove it from the profile"
        )
    settings = {**profile.settings, **dict(lab.placeholder)}
    return dataclasses.replace(profile, settings=settings)
