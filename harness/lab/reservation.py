"""One labgrid place held for this process: reserve, wait, acquire, hand over (needs labgrid).

See :mod:`harness.profiles.lab_setting` for how a place is chosen. Everything goes through this
process's :class:`~harness.lab.client_session.LabSession`; what the coordinator says of
places and resources is checked before it is used (a bad place is skipped, never
chosen), and waiting is on the coordinator's stream of updates.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace

from harness.devices.acquired_place import LabResourceError, LabResources
from harness.lab import quarantine as lab_quarantine
from harness.lab.client_session import LabgridError, LabSession
from harness.lab.identity import LabIdentity
from harness.lab.places import BadPlace, PlaceState, place_state
from harness.lab.power import cycle_power
from harness.lab.resources import matched_resources, read_resources
from harness.lifecycle import owner
from harness.profiles.lab_setting import HEALTHY, LabgridPlace

_RECONNECT = ("", "")  # what the wait gives when the coordinator went away or came back
_REPLAN = ("", "replan")  # ... when the usable places changed
_KEEPALIVE_S = 20.0  # the coordinator drops a waiting reservation 60 s after its last poll


class LabgridBusy(LabgridError):
    """No place was allocated within the wait; the message names who holds them."""


class NoUsablePlace(LabgridError):
    """No place the profile asks for passes the checks; the message gives each reason."""


class PlaceLost(LabgridError):
    """The held place is no longer this process's (deleted, released by someone, or the
    coordinator restarted and forgot every acquisition)."""


class StaleHolderReleased(UserWarning):
    """A place held by a dead run of this host was released so that this run can use it."""


class BadPlaceSkipped(UserWarning):
    """A place the profile would match fails the value rules; it is never chosen."""


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _skip(reason: str) -> None:
    """One warning per bad place and reason, per process."""
    with _warned_lock:
        if reason in _warned:
            return
        _warned.add(reason)
    print(f"et-harness: skipping {reason}", file=sys.stderr, flush=True)
    warnings.warn(BadPlaceSkipped(f"skipping {reason}"), stacklevel=3)


@dataclass(frozen=True)
class HeldPlace:
    """A place this process acquired: its name, exporters, resources and times."""

    name: str
    exporters: tuple[str, ...]
    resources: LabResources
    reservation: str
    acquired_at: float  # time.time() when the coordinator confirmed the acquisition


class LabgridReservation:
    """One place of one profile held for this process: acquire, reset, hand over."""

    def __init__(
        self,
        wanted: LabgridPlace,
        identity: LabIdentity | None = None,
        avoid: Mapping[str, str] | None = None,
        prefer: str | None = None,
    ) -> None:
        self.wanted = wanted
        self.avoid = dict(avoid or {})  # place -> why this run took it out (never reserved)
        self.prefer = prefer  # the place to take again when it is free (one held before)
        self.lab = LabSession.of(wanted.coordinator, identity or LabIdentity.this_process())
        self.token: str | None = None  # the reservation of the held place
        self.held: HeldPlace | None = None
        self.released_at: float | None = None
        self._lost: str | None = None  # why the held place is no longer ours
        self.stale_released: list[str] = []  # places this run took back from dead runs
        self._waiting: dict[str, str] = {}  # place -> token of a reservation for it
        self._generation = 0  # the session's, when the reservations were last made
        self._made_in: dict[str, int] = {}  # token -> the session's generation then
        self._recorded: list[list[str]] = []

    @property
    def waiting(self) -> bool:
        """Whether reservations of this are waiting for a place."""
        return bool(self._waiting)

    @property
    def tokens(self) -> frozenset[str]:
        """The reservations of this not yet taken up."""
        return frozenset(self._waiting.values())

    # ---- what may be chosen -------------------------------------------------------------

    def candidates(self) -> tuple[list[PlaceState], list[PlaceState], list[str]]:
        """The places this asks for that pass the checks; those of them not to reserve now
        (their exporter has nothing available, or, with lab-wide quarantine, they are out of
        service): waited for, never reserved; one line per place that fails or that this
        run took out."""
        raws, resources = self.lab.snapshot()
        usable, unavailable, skipped = [], [], []
        for raw in raws:
            if not self.wanted.asks_for(raw.name, dict(raw.tags)):
                continue
            if raw.name in self.avoid:
                skipped.append(f"{raw.name}: taken out of this run ({self.avoid[raw.name]})")
                continue
            try:
                state = place_state(raw, self.lab.coordinator)
                matched = matched_resources(raw, resources)
                read_resources(state.name, matched, acquired=False)
            except (BadPlace, LabResourceError) as exc:
                skipped.append(str(exc))
                _skip(str(exc))
                continue
            if raw.matches and not any(r.available for r in matched):
                unavailable.append(state)  # reserved once its exporter is back
                continue
            if self.wanted.quarantine == "lab" and (lab_quarantine.health_of(state) != HEALTHY):
                unavailable.append(state)  # a reservation for it could never be granted
                continue
            usable.append(state)
        return usable, unavailable, skipped

    def states(self) -> list[PlaceState]:
        """Every place that passes the checks (others left out silently)."""
        raws, _ = self.lab.snapshot()
        found = []
        for raw in raws:
            try:
                found.append(place_state(raw))
            except BadPlace:
                continue
        return found

    # ---- acquiring ----------------------------------------------------------------------

    def acquire(self, timeout: float) -> HeldPlace:
        """Reserve each usable place, wait at most ``timeout`` s for one to be allocated,
        acquire it; the place held. :class:`LabgridBusy` names the holders when none came
        free, :class:`NoUsablePlace` gives the reasons when none may be used."""
        deadline = time.monotonic() + timeout
        self.release_stale()
        try:
            while True:
                usable, unavailable, skipped = self.candidates()
                self._refuse_if_none(usable, unavailable, skipped)
                self._reserve(usable)
                allocated = self.lab.wait_for(self._ready, min(deadline, self._keepalive()))
                if allocated == _RECONNECT:
                    self.lab.connected()
                elif allocated == _REPLAN:
                    continue
                elif allocated is not None:
                    held = self._take(*allocated, deadline)
                    if held is not None:
                        return held
                elif time.monotonic() >= deadline:
                    raise LabgridBusy(
                        f"{self.wanted.what} was not allocated within {timeout:.1f} s: "
                        f"{self._holders()} (raise --lock-timeout, or free a place: "
                        f"'labgrid-client -x {self.lab.coordinator} -p PLACE release-from "
                        "HOLDER')"
                    )
                else:
                    self._poll()
        except BaseException:
            self.release()
            raise

    def _refuse_if_none(
        self, usable: list[PlaceState], unavailable: list[PlaceState], skipped: list[str]
    ) -> None:
        if self.wanted.quarantine == "lab":
            lab_quarantine.refuse_if_none_in_service(
                self.wanted.what, usable + unavailable, self.lab.coordinator
            )
        if not usable and not unavailable:
            reasons = "; ".join(skipped) or (
                "no place matches (check the coordinator, the place's name or its tags)"
            )
            raise NoUsablePlace(f"{self.wanted.what} at {self.lab.coordinator}: {reasons}")

    def _reserve(self, usable: list[PlaceState]) -> None:
        """One reservation per usable place that has none of ours; cancel those of places
        no longer usable. A coordinator that restarted forgot them all: made again."""
        if self._generation != self.lab.generation:
            self._waiting = {  # a reservation made after a reconnect is kept
                name: token
                for name, token in self._waiting.items()
                if self._made_in.get(token) == self.lab.generation
            }
            self._generation = self.lab.generation
        names = self._plan(usable)
        for name in sorted(set(self._waiting) - names):
            self._cancel(self._waiting.pop(name))
        messages = self.lab.messages()
        for name in sorted(names - set(self._waiting)):
            fltr = messages.Reservation.Filter(filter={**self.wanted.filters, "name": name})
            request = messages.CreateReservationRequest(filters={"main": fltr}, prio=0.0)
            response = self.lab.call("reserve", "CreateReservation", request)
            self._waiting[name] = response.reservation.token
            self._made_in[response.reservation.token] = self.lab.generation
            self._last_poll = time.monotonic()
        self._set_hand_back()
        self.lab.notify()

    def _plan(self, usable: list[PlaceState]) -> set[str]:
        """Which places to hold reservations for: one open place (free, or allocated to
        us) if there is one, so a free place costs one reservation; else every usable
        place, so that the first one freed comes to us in the coordinator's order."""
        mine = set(self._waiting.values())
        open_places = sorted(
            state.name
            for state in usable
            if state.acquired is None and (state.reservation is None or state.reservation in mine)
        )
        if not open_places:
            return {state.name for state in usable}
        ours = [name for name in open_places if name in self._waiting]
        if ours:
            return {ours[0]}
        if self.prefer in open_places:
            return {self.prefer}
        spread = zlib.crc32(self.lab.identity.owner.encode()) % len(open_places)
        return {open_places[spread]}  # runners asking at once start on different places

    def _keepalive(self) -> float:
        return getattr(self, "_last_poll", time.monotonic()) + _KEEPALIVE_S

    def _poll(self) -> None:
        """Keep the waiting reservations alive; forget those the coordinator dropped."""
        messages = self.lab.messages()
        for name, token in list(self._waiting.items()):
            try:
                request = messages.PollReservationRequest(token=token)
                self.lab.call("poll", "PollReservation", request)
            except LabgridError:
                del self._waiting[name]  # expired or invalid: made again in the next round
        self._last_poll = time.monotonic()

    def _ready(self) -> tuple[str, str] | None:
        """(place, token) of a place allocated to one of our reservations;
        :data:`_RECONNECT` when the coordinator went away or came back (the reservations
        must be made again); :data:`_REPLAN` when the usable places changed."""
        if self.lab.lost() or self._generation != self.lab.generation:
            return _RECONNECT
        tokens = {token: name for name, token in self._waiting.items()}
        raws, _ = self.lab.snapshot()
        for raw in raws:
            if raw.reservation in tokens and not raw.acquired:
                return raw.name, str(raw.reservation)
        if self._plan(self.candidates()[0]) != set(self._waiting):
            return _REPLAN
        return None

    def _take(self, name: str, token: str, deadline: float) -> HeldPlace | None:
        """Acquire ``name``, allocated to ``token``; the others cancelled. None if the
        allocation was lost meanwhile (the caller waits again)."""
        messages = self.lab.messages()
        request = messages.AcquirePlaceRequest(placename=name)
        self.token = token
        while True:
            try:
                self.lab.call(f"acquire {name}", "AcquirePlace", request)
                break
            except LabgridError as exc:
                if "Failed to acquire resources" not in str(exc):
                    self.token = None
                    if "already acquired" in str(exc) or "not reserved" in str(exc):
                        return None
                    raise
                if time.monotonic() > deadline:
                    raise LabgridBusy(f"{self.wanted.what}: cannot acquire {name}: {exc}") from None
            # the exporter lets a released place's resources go a moment after the
            # coordinator says so (ser2net takes time to stop): retried at its next update
            self.lab.wait_update(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
        acquired_at = time.time()
        del self._waiting[name]
        for other in list(self._waiting.values()):
            self._cancel(other)
        self._waiting.clear()
        self.held = HeldPlace(name, (), LabResources(), token, acquired_at)
        self._set_hand_back()
        self.held = self._read_held(name, token, acquired_at, deadline)
        return self.held

    def _read_held(self, name: str, token: str, acquired_at: float, deadline: float) -> HeldPlace:
        """The acquired place's resources, once its exporters have opened them."""

        def ready() -> HeldPlace | None:
            try:
                return self._held_now(name, token, acquired_at)
            except LabResourceError:
                if time.monotonic() < deadline:
                    return None  # a serial port's network port comes a moment later
                raise

        held = self.lab.wait_for(ready, min(deadline, time.monotonic() + 5.0))
        if held is None:
            held = ready()
        assert held is not None
        return held

    def _held_now(self, name: str, token: str, acquired_at: float) -> HeldPlace:
        """The acquired place with its resources as its exporters export them now;
        :class:`LabResourceError` while one it needs is missing."""
        raws, resources = self.lab.snapshot()
        raw = next((r for r in raws if r.name == name), None)
        if raw is None:
            raise PlaceLost(f"labgrid place {name!r} was deleted as it was acquired")
        state = place_state(raw)
        paths = set(raw.acquired_resources)
        taken = [r for r in resources if (r.exporter, r.group, r.cls, r.name) in paths]
        found = read_resources(name, taken, acquired=True)
        return HeldPlace(
            name,
            state.exporters,
            replace(found, tags=state.tags, coordinator=self.lab.coordinator),
            token,
            acquired_at,
        )

    def resources_moved(self, timeout: float) -> bool:
        """Whether the held place's resources are no longer those it was acquired with (its
        exporter restarted: a serial port comes back on a new network port), once they are
        back; waits at most ``timeout`` s while one is missing. False if they are the same
        or not back in time; :class:`PlaceLost` if the place is no longer held."""
        held = self.held
        assert held is not None, "acquire the place first"

        def ready() -> HeldPlace | None:
            self.check_held()
            try:
                return self._held_now(held.name, held.reservation, held.acquired_at)
            except LabResourceError:
                return None  # its exporter is away: waited for

        now = self.lab.wait_for(ready, time.monotonic() + timeout)
        return now is not None and now.resources != held.resources

    def _holders(self) -> str:
        try:
            states = [s for s in self.states() if self.wanted.asks_for(s.name, dict(s.tags))]
        except LabgridError as exc:
            return f"(cannot list the places: {exc})"
        if not states:
            return "no place matches (check the coordinator, the place's name or its tags)"
        return "; ".join(state.describe() for state in states)

    # ---- holding ----------------------------------------------------------------------

    def check_held(self) -> None:
        """:class:`PlaceLost` if the held place is no longer this process's (from then on:
        a place lost stays lost for this reservation)."""
        assert self.held is not None, "acquire the place first"
        if self._lost is not None:
            raise PlaceLost(self._lost)
        name, me = self.held.name, self.lab.identity.owner
        restarted = self.lab.lost() or self._generation != self.lab.generation
        raws, _ = self.lab.snapshot()
        raw = next((r for r in raws if r.name == name), None)
        if raw is not None and raw.acquired == me and not restarted:
            return
        why = (
            "the coordinator restarted and forgot it"
            if restarted
            else "it was deleted"
            if raw is None
            else f"it is now {'acquired by ' + str(raw.acquired) if raw.acquired else 'free'}"
        )
        self._lost = f"labgrid place {name!r} at {self.lab.coordinator} was lost: {why}"
        raise PlaceLost(self._lost)  # the release at the end is "from" this process only

    def quarantine(self, reason: str) -> str:
        """Take the held place out of service lab-wide (who, when, why in its comment)."""
        assert self.held is not None, "acquire the place first"
        return lab_quarantine.quarantine(self.lab, self.held.name, reason)

    def power_cycle(self) -> None:
        """Switch the place's power port off and on (labgrid's own power driver)."""
        assert self.held is not None, "acquire the place first"
        port = self.held.resources.power_port
        if port is None:
            raise LabResourceError(f"labgrid place {self.held.name!r} has no NetworkPowerPort")
        cycle_power(self.held.name, port)

    # ---- handing over -------------------------------------------------------------------

    def release(self) -> None:
        """Cancel the reservations, then release the place; safe to call twice."""
        token, self.token = self.token, None
        held, self.held = self.held, None
        tokens = [*([token] if token else []), *self._waiting.values()]
        self._waiting.clear()
        try:
            for each in tokens:
                self._cancel(each)
            if held is not None:
                messages = self.lab.messages()
                self.lab.call(
                    f"release {held.name}",
                    "ReleasePlace",
                    messages.ReleasePlaceRequest(
                        placename=held.name, fromuser=self.lab.identity.owner
                    ),
                )
                self.released_at = time.time()
        finally:
            self._set_hand_back()

    def _cancel(self, token: str) -> None:
        messages = self.lab.messages()
        try:
            request = messages.CancelReservationRequest(token=token)
            self.lab.call("cancel", "CancelReservation", request)
        except LabgridError:
            pass  # expired, or the coordinator forgot it in a restart: gone either way

    def _set_hand_back(self) -> None:
        """Record what this process's janitor runs if the process dies holding a place or
        reservations: the same hand-over (:mod:`harness.lab.handback`)."""
        tokens = [*([self.token] if self.token else []), *self._waiting.values()]
        commands: list[list[str]] = []
        if tokens or self.held is not None:
            commands = [
                [
                    sys.executable,
                    "-m",
                    "harness.lab.handback",
                    "-x",
                    self.lab.coordinator,
                    self.lab.identity.owner,
                    *sorted(tokens),
                ]
            ]
        owner.current().replace_hand_back(self._recorded, commands)
        self._recorded = commands

    def release_stale(self) -> list[PlaceState]:
        """Release places acquired by dead processes of this host (a ``kill -9``'d run),
        cancelling their reservations first; the places as they were before."""
        host = self.lab.identity.host
        states = self.states()
        messages = self.lab.messages()
        dead_tokens = []
        for reservation in self.lab.call(
            "reservations", "GetReservations", messages.GetReservationsRequest()
        ).reservations:
            holder = LabIdentity.parse(reservation.owner)
            if holder is not None and holder.is_gone_from(host):
                dead_tokens.append(reservation.token)
        for token in dead_tokens:  # first, or a place stays allocated to a dead run
            self._cancel(token)
        for state in states:
            holder = LabIdentity.parse(state.acquired or "")
            if holder is None or not holder.is_gone_from(host):
                continue
            self.lab.call(
                f"release {state.name}",
                "ReleasePlace",
                messages.ReleasePlaceRequest(placename=state.name, fromuser=holder.owner),
            )
            self.stale_released.append(state.name)
            warnings.warn(
                StaleHolderReleased(
                    f"released labgrid place {state.name}, held by {holder.owner} (a run that is "
                    "gone)"
                ),
                stacklevel=2,
            )
        return states
