"""Holding a labgrid place for a device: reserve, wait, acquire, hand over (needs labgrid).

A profile describes a kind of device; the lab's places are its instances. The
profile names a coordinator and either one place or a tag filter (a pool)::

    transport:
      kind: serial                       # or ssh, adb
      labgrid:
        coordinator: "127.0.0.1:20408"   # optional: else $LG_COORDINATOR
        tags: {kind: mcu, pool: lab}     # any free place with these tags ...
        # place: board-7                 # ... or this one place
        reset: power                     # optional: power-cycle the place's power port
                                         # before each agent session (a fresh registry)
        quarantine: lab                  # optional: a failed health check takes the
                                         # place out of service lab-wide (lab_quarantine)

The harness drives labgrid's own client (:mod:`harness.farm.lab_client`):
``reserve --shell FILTER`` gives a token, ``wait TOKEN`` (bounded by the lock
timeout) until the coordinator allocates a place, ``-p +TOKEN acquire`` takes it
and ``-p +TOKEN env`` says where its resources are (see
:mod:`harness.farm.lab_resources`). Hand-over cancels the reservation first and
then releases the place: the other order leaves the place allocated to a
cancelled token until the coordinator's next 15 s scheduling pass.

Every process is its own labgrid owner, ``HOST/USER-pidPID-START`` (START is the
process's start time, which guards against PID reuse), so two xdist workers are
two owners and a run's holdings say which process holds them. The coordinator
never expires an acquired place, so a run that dies holding one hands it back twice
over: its janitor (:mod:`harness.lifecycle.janitor`, which outlives a ``kill -9``)
runs the same hand-over; and before reserving, a run releases (and cancels the
reservation of) every place acquired by an identity of this host whose process is
gone, for when the janitor died too.
"""

from __future__ import annotations

import dataclasses
import re
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.config.kinds import KINDS
from harness.config.profile import DeviceProfile, ProfileError
from harness.devices.lab_place import LabResources
from harness.farm import lab_quarantine
from harness.farm.lab_client import (
    CLIENT,
    LabgridClient,
    LabgridError,
    LabgridTimeout,
    find_client_path,
)
from harness.farm.lab_places import LabIdentity, PlaceState
from harness.farm.lab_resources import check_lab_profile, parse_env
from harness.lifecycle import owner
from harness.untrusted.value_rules import ValueRuleError, check_word, split_host_port

SETTING = "labgrid"
_TOKEN = re.compile(r"LG_TOKEN=([A-Za-z0-9_-]{1,64})")
_ACQUIRED = re.compile(r"^acquired place (?P<place>[A-Za-z0-9_.:@+\[\]-]{1,200})$", re.MULTILINE)
_TAG = re.compile(r"[a-z][a-z0-9_]{0,63}")  # labgrid's own tag key rule, bounded
_TAG_VALUE = re.compile(r"[a-z0-9_]{1,64}")  # labgrid's own tag value rule, bounded
_RESETS = ("none", "power")
_FIELDS = ("coordinator", "place", "quarantine", "reset", "tags")


class LabgridNotInstalled(ProfileError):
    """The profile names a labgrid place but labgrid's client is not installed here."""


class StaleHolderReleased(UserWarning):
    """A place held by a dead run of this host was released so that this run can use it."""


class LabgridBusy(LabgridError):
    """No place was allocated within the wait; the message names who holds them."""


@dataclass(frozen=True)
class LabgridPlace:
    """What a profile asks of the lab: one place by name, or any place with ``tags``."""

    place: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    coordinator: str | None = None  # None: labgrid's default ($LG_COORDINATOR)
    reset: str = "none"
    quarantine: str = "run"  # "lab": a failed health check quarantines the place lab-wide

    @property
    def filters(self) -> list[str]:
        """The reservation filter, as ``labgrid-client reserve`` takes it; with lab-wide
        quarantine, only places in service (``et_health=ok``)."""
        wanted = (
            [f"name={self.place}"]
            if self.place is not None
            else [f"{key}={value}" for key, value in self.tags]
        )
        if self.quarantine == "lab":
            wanted.append(f"{lab_quarantine.HEALTH_TAG}={lab_quarantine.HEALTHY}")
        return wanted

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
        reset = data.get("reset", "none")
        if reset not in _RESETS:
            raise ProfileError(
                f"{where}.reset: {reset!r} is not one of {', '.join(_RESETS)} (power: cycle "
                "the place's power port before each agent session)"
            )
        if reset != "none" and not KINDS[profile.transport].takes_outside_reset:
            resettable = ", ".join(k.name for k in KINDS.values() if k.takes_outside_reset)
            raise ProfileError(
                f"{where}.reset: {reset}, but a {profile.transport} device is not reset from "
                f"outside (only transport.kind {resettable} is): remove the field"
            )
        quarantine = data.get("quarantine", "run")
        if quarantine not in lab_quarantine.MODES:
            raise ProfileError(
                f"{where}.quarantine: {quarantine!r} is not one of "
                f"{', '.join(lab_quarantine.MODES)} (lab: a failed health check tags the place "
                f"{lab_quarantine.HEALTH_TAG}={lab_quarantine.QUARANTINED} for every runner)"
            )
        return cls(place, tags, coordinator, reset, quarantine)


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


def find_client(profile: DeviceProfile, search_path: str | None = None) -> str:
    """Path of ``labgrid-client`` for ``profile``; :class:`LabgridNotInstalled`."""
    found = find_client_path(search_path)
    if found is None:
        raise LabgridNotInstalled(
            f"{profile.where('transport.' + SETTING)}: the profile names a labgrid place but "
            f"{CLIENT} is not installed here; install the harness with its labgrid extra "
            "('pip install -e .[labgrid]', docs/device-farm.md) on this machine, or use a "
            "profile without the labgrid setting"
        )
    return found


# ---- one reservation ------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldPlace:
    """A place this process acquired: its name, exporters and resources."""

    name: str
    exporters: tuple[str, ...]
    resources: LabResources


class LabgridReservation:
    """One reservation of one place for this process: acquire, reset, hand over."""

    def __init__(
        self, wanted: LabgridPlace, client: str, identity: LabIdentity | None = None
    ) -> None:
        self.wanted = wanted
        self.lab = LabgridClient(client, wanted.coordinator, identity or LabIdentity.this_process())
        self.token: str | None = None
        self.held: HeldPlace | None = None
        self.stale_released: list[str] = []  # places this run took back from dead runs
        self._recorded: list[list[str]] = []  # this reservation's hand-back commands

    def acquire(self, timeout: float) -> HeldPlace:
        """Reserve, wait at most ``timeout`` s for an allocation, acquire; the place held.

        :class:`LabgridBusy` names who holds the matching places when none came free.
        """
        deadline = time.monotonic() + timeout
        states = self.release_stale()
        if self.wanted.quarantine == "lab":
            lab_quarantine.refuse_if_none_in_service(
                self.wanted.what, [s for s in states if s.matches(self.wanted)]
            )
        try:
            output = self.lab.run(
                ["reserve", "--wait", "--shell", *self.wanted.filters], timeout=max(timeout, 0.1)
            )
        except LabgridTimeout as exc:
            self.token = _token(exc.output)
            self.release()
            raise LabgridBusy(
                f"{self.wanted.what} was not allocated within {timeout:.1f} s: "
                f"{self._holders()} (raise --lock-timeout, or free a place: "
                f"'{CLIENT} -p PLACE release-from HOLDER')"
            ) from None
        self.token = _token(output)
        if self.token is None:
            raise LabgridError(
                f"{self.wanted.what}: '{CLIENT} reserve' printed no LG_TOKEN: {output[:200]!r}"
            )
        try:
            self._set_hand_back()  # before acquiring: a kill may come during the call
            acquired = self._acquire_allocated(deadline)
            name = _ACQUIRED.search(acquired)
            if name is None:
                raise LabgridError(
                    f"{self.wanted.what}: '{CLIENT} acquire' did not say which "
                    f"place: {acquired[:200]!r}"
                )
            self.held = HeldPlace(name["place"], (), LabResources())  # release() undoes it
            self._set_hand_back()
            place, resources = parse_env(self.lab.run(["-p", name["place"], "env"]))
            state = next((s for s in states if s.name == place), None)
            tags = state.tags if state is not None else ()
            self.held = HeldPlace(
                place, _exporters(states, place), dataclasses.replace(resources, tags=tags)
            )
        except BaseException:
            self.release()
            raise
        return self.held

    def _acquire_allocated(self, deadline: float) -> str:
        """``-p +TOKEN acquire``; what it printed. An exporter frees a released place's
        resources a moment after the coordinator says so (ser2net takes about a second
        to stop), so an acquisition refused for that reason is tried again until
        ``deadline``."""
        while True:
            try:
                return self.lab.run(["-p", f"+{self.token}", "acquire"])
            except LabgridError as exc:
                if "Failed to acquire resources" not in str(exc) or time.monotonic() > deadline:
                    raise LabgridBusy(
                        f"{self.wanted.what}: cannot acquire the allocated "
                        f"place: {exc}; {self._holders()}"
                    ) from None
            time.sleep(0.2)  # the exporter gives no notice when it has let them go

    def _holders(self) -> str:
        try:
            states = [s for s in self.lab.places() if s.matches(self.wanted)]
        except LabgridError as exc:
            return f"(cannot list the places: {exc})"
        if not states:
            return "no place matches (check the coordinator, the place's name or its tags)"
        return "; ".join(state.describe() for state in states)

    def quarantine(self, reason: str) -> str:
        """Take the held place out of service lab-wide (who, when, why in its comment)."""
        assert self.held is not None, "acquire the place first"
        return lab_quarantine.quarantine(self.lab, self.held.name, reason)

    def power_cycle(self) -> None:
        """Switch the place's power port off and on again (labgrid's power protocol)."""
        assert self.held is not None, "acquire the place first"
        self.lab.run(["-p", self.held.name, "power", "cycle", "--delay", "0.1"])

    def release(self) -> None:
        """Cancel the reservation, then release the place; safe to call twice."""
        token, self.token = self.token, None
        held, self.held = self.held, None
        try:
            if token is not None:
                self.lab.run(["cancel-reservation", token])
        finally:
            try:
                if held is not None:
                    self.lab.run(["-p", held.name, "release"])
            finally:
                self._set_hand_back()

    def _set_hand_back(self) -> None:
        """Record what this process's janitor runs if the process dies holding the place:
        the same hand-over, as commands that need no identity (``release-from`` this
        one). Until the place's name is known, it is found through the token."""
        commands: list[list[str]] = []
        mine = self.lab.identity.owner
        if self.held is not None and self.token is not None:
            commands = [
                self.lab.argv("cancel-reservation", self.token),
                self.lab.argv("-p", self.held.name, "release-from", mine),
            ]
        elif self.token is not None:
            commands = [
                self.lab.argv("-p", f"+{self.token}", "release-from", mine),
                self.lab.argv("cancel-reservation", self.token),
            ]
        me = owner.current()
        for argv in self._recorded:
            me.remove_hand_back(argv)
        for argv in commands:
            me.add_hand_back(argv)
        self._recorded = commands

    def release_stale(self) -> list[PlaceState]:
        """Release places acquired by dead processes of this host (a ``kill -9``'d run);
        the coordinator's view of the places from before."""
        host = self.lab.identity.host
        states = self.lab.places()
        for state in states:
            holder = LabIdentity.parse(state.acquired or "")
            if holder is None or not holder.is_gone_from(host):
                continue
            if state.reservation is not None:
                try:  # first, or the place stays allocated to the dead run's reservation
                    self.lab.run(["cancel-reservation", state.reservation], identity=holder)
                except LabgridError:
                    pass  # it expired meanwhile
            try:
                self.lab.run(["-p", state.name, "release-from", holder.owner])
            except LabgridError:
                if self._held_by(state.name, holder.owner):
                    raise
                continue  # handed back meanwhile: the dead run's record, swept by another run
            self.stale_released.append(state.name)
            warnings.warn(
                StaleHolderReleased(
                    f"released labgrid place {state.name}, held by {holder.owner} (a run that is "
                    "gone)"
                ),
                stacklevel=2,
            )
        return states

    def _held_by(self, place: str, holder: str) -> bool:
        """Whether the coordinator says ``holder`` still holds ``place``."""
        return any(s.name == place and s.acquired == holder for s in self.lab.places())


def _token(output: str) -> str | None:
    match = _TOKEN.search(output)
    return match.group(1) if match else None


def _exporters(states: list[PlaceState], place: str) -> tuple[str, ...]:
    """The exporters a place's matches name (``exporter/group/class``), from the listing."""
    for state in states:
        if state.name == place:
            return tuple(dict.fromkeys(m.split("/")[0] for m in state.patterns))
    return ()
