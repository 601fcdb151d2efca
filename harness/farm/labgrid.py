"""Holding a labgrid place for a device: reserve, wait, acquire, hand over (needs labgrid).

A profile describes a kind of device; the lab's places are its instances. The
profile names a coordinator and either one place or a tag filter (a pool)::

    transport:
      kind: serial                       # or ssh
      labgrid:
        coordinator: "127.0.0.1:20408"   # optional: else $LG_COORDINATOR
        tags: {kind: mcu, pool: lab}     # any free place with these tags ...
        # place: board-7                 # ... or this one place
        reset: power                     # optional: power-cycle the place's power port
                                         # before each agent session (a fresh registry)

The harness drives labgrid's own client (``labgrid-client``, argv lists only):
``reserve --shell FILTER`` gives a token, ``wait TOKEN`` (bounded by the lock
timeout) until the coordinator allocates a place, ``-p +TOKEN acquire`` takes it
and ``-p +TOKEN env`` says where its resources are (see
:mod:`harness.farm.lab_resources`). Hand-over cancels the reservation first and
then releases the place: the other order leaves the place allocated to a
cancelled token until the coordinator's next 15 s scheduling pass.

Every process is its own labgrid owner, ``HOST/USER-pidPID-START`` (START is the
process's start time, which guards against PID reuse), so two xdist workers are
two owners and a run's holdings say which process holds them. The coordinator
never expires an acquired place; before reserving, a run releases (and cancels the
reservation of) every place acquired by an identity of this host whose process is
gone — a run killed with ``kill -9``.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.farm.lab_resources import LabResources, check_lab_profile, parse_env
from harness.lifecycle.reap import start_time
from harness.profile import DeviceProfile, ProfileError
from harness.transport.base import DeviceUnavailable
from harness.value_rules import ValueRuleError, check_word, split_host_port

SETTING = "labgrid"
CLIENT = "labgrid-client"
_COMMAND_TIMEOUT_S = 30.0
_OUTPUT_LIMIT = 256 * 1024  # what a labgrid-client call may print before it is refused
_TOKEN = re.compile(r"LG_TOKEN=([A-Za-z0-9_-]{1,64})")
_TAG = re.compile(r"[a-z][a-z0-9_]{0,63}")  # labgrid's own tag key rule, bounded
_TAG_VALUE = re.compile(r"[a-z0-9_]{1,64}")  # labgrid's own tag value rule, bounded
_RESETS = ("none", "power")
_FIELDS = ("coordinator", "place", "reset", "tags")


class LabgridNotInstalled(ProfileError):
    """The profile names a labgrid place but labgrid's client is not installed here."""


class LabgridError(DeviceUnavailable):
    """labgrid's client failed, or printed something the harness does not accept."""


class LabgridBusy(LabgridError):
    """No place was allocated within the wait; the message names who holds them."""


@dataclass(frozen=True)
class LabgridPlace:
    """What a profile asks of the lab: one place by name, or any place with ``tags``."""

    place: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    coordinator: str | None = None  # None: labgrid's default ($LG_COORDINATOR)
    reset: str = "none"

    @property
    def filters(self) -> list[str]:
        """The reservation filter, as ``labgrid-client reserve`` takes it."""
        if self.place is not None:
            return [f"name={self.place}"]
        return [f"{key}={value}" for key, value in self.tags]

    @property
    def what(self) -> str:
        """``place 'board-7'`` or ``a place with tags kind=mcu pool=lab``, for messages."""
        if self.place is not None:
            return f"labgrid place {self.place!r}"
        return f"a labgrid place with tags {' '.join(self.filters)}"

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
            raise ProfileError(f"{where}.{unknown[0]}: unknown field; allowed: {', '.join(_FIELDS)}")
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
        return cls(place, tags, coordinator, reset)


def _tags(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping) or not value:
        raise ProfileError(f"{where}: must be a non-empty mapping of tag: value")
    if len(value) > 16:
        raise ProfileError(f"{where}: at most 16 tags; got {len(value)}")
    pairs = []
    for key, tag_value in value.items():
        text = str(tag_value) if isinstance(tag_value, int) and not isinstance(tag_value, bool) \
            else tag_value
        if not isinstance(key, str) or not _TAG.fullmatch(key):
            raise ProfileError(f"{where}: tag {key!r} is not a labgrid tag name ([a-z][a-z0-9_]*)")
        if not isinstance(text, str) or not _TAG_VALUE.fullmatch(text):
            raise ProfileError(
                f"{where}.{key}: {tag_value!r} is not a labgrid tag value ([a-z0-9_]+)"
            )
        pairs.append((key, text))
    return tuple(sorted(pairs))


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
    """Path of ``labgrid-client`` (on PATH or beside this Python); :class:`LabgridNotInstalled`."""
    path = search_path if search_path is not None else os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    )
    found = shutil.which(CLIENT, path=path)
    if found is None:
        raise LabgridNotInstalled(
            f"{profile.where('transport.' + SETTING)}: the profile names a labgrid place but "
            f"{CLIENT} is not installed here; install the harness with its labgrid extra "
            "('pip install -e .[labgrid]', docs/device-farm.md) on this machine, or use a "
            "profile without the labgrid setting"
        )
    return found


# ---- identities ------------------------------------------------------------------------------

_IDENTITY = re.compile(r"(?P<host>[^/]+)/(?P<user>.+)-pid(?P<pid>[0-9]{1,10})-(?P<start>[0-9]{1,20})")


@dataclass(frozen=True)
class LabIdentity:
    """One process as a labgrid owner: ``HOST/USER-pidPID-START``."""

    host: str
    user: str
    pid: int
    start: int

    @classmethod
    def this_process(cls) -> LabIdentity:
        """This process, with the host and user labgrid itself would use (LG_HOSTNAME, LG_USERNAME)."""
        pid = os.getpid()
        host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
        user = os.environ.get("LG_USERNAME") or getpass.getuser()
        return cls(host, user, pid, start_time(pid) or 0)

    @classmethod
    def parse(cls, owner: str) -> LabIdentity | None:
        """The identity in a coordinator's ``acquired: HOST/USER`` field, if it is one of ours."""
        match = _IDENTITY.fullmatch(owner)
        if match is None:
            return None
        return cls(match["host"], match["user"], int(match["pid"]), int(match["start"]))

    @property
    def username(self) -> str:
        return f"{self.user}-pid{self.pid}-{self.start}"

    @property
    def owner(self) -> str:
        return f"{self.host}/{self.username}"

    def environment(self) -> dict[str, str]:
        return {"LG_HOSTNAME": self.host, "LG_USERNAME": self.username}

    def is_gone_from(self, host: str) -> bool:
        """Whether this identity is a process of ``host`` that no longer runs."""
        return self.host == host and start_time(self.pid) != self.start


# ---- the coordinator's view -----------------------------------------------------------------

_PLACE_LINE = re.compile(r"Place '(?P<name>[^']{1,200})':")
_FIELD_LINE = re.compile(r"  (?P<key>[a-z ]{1,40}): ?(?P<value>.{0,1000})")


@dataclass(frozen=True)
class PlaceState:
    """One place as ``labgrid-client -v places`` shows it."""

    name: str
    tags: tuple[tuple[str, str], ...]
    acquired: str | None  # HOST/USER of the holder
    reservation: str | None  # the token it is allocated to
    comment: str = ""

    def matches(self, wanted: LabgridPlace) -> bool:
        if wanted.place is not None:
            return self.name == wanted.place
        return set(wanted.tags) <= set(self.tags)

    def describe(self) -> str:
        held = f"acquired by {self.acquired}" if self.acquired else "not acquired"
        reserved = f", allocated to reservation {self.reservation}" if self.reservation else ""
        comment = f", comment: {self.comment}" if self.comment else ""
        return f"{self.name} ({held}{reserved}{comment})"


def parse_places(text: str) -> list[PlaceState]:
    """The places in ``labgrid-client -v places`` output (other lines are ignored)."""
    places: list[PlaceState] = []
    fields: dict[str, str] = {}
    name: str | None = None

    def finish() -> None:
        if name is not None:
            tags = tuple(sorted(
                tuple(pair.split("=", 1)) for pair in fields.get("tags", "").split(", ")
                if "=" in pair
            ))  # type: ignore[misc]
            acquired = fields.get("acquired", "None")
            reservation = fields.get("reservation", "None")
            places.append(PlaceState(
                name, tags,  # type: ignore[arg-type]
                None if acquired in ("None", "") else acquired,
                None if reservation in ("None", "") else reservation,
                fields.get("comment", ""),
            ))

    for line in text.splitlines():
        start = _PLACE_LINE.fullmatch(line)
        if start is not None:
            finish()
            name, fields = start["name"], {}
            continue
        field = _FIELD_LINE.fullmatch(line)
        if field is not None and name is not None:
            fields.setdefault(field["key"], field["value"].strip())
    finish()
    return places


# ---- one reservation ------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldPlace:
    """A place this process acquired: its name, exporters and resources."""

    name: str
    exporters: tuple[str, ...]
    resources: LabResources


class LabgridClient:
    """``labgrid-client`` calls as one identity against one coordinator."""

    def __init__(self, client: str, coordinator: str | None, identity: LabIdentity) -> None:
        self.client = client
        self.coordinator = coordinator
        self.identity = identity

    def argv(self, *args: str) -> list[str]:
        coordinator = ["-x", self.coordinator] if self.coordinator else []
        return [self.client, *coordinator, *args]

    def run(self, args: Sequence[str], timeout: float = _COMMAND_TIMEOUT_S,
            identity: LabIdentity | None = None) -> str:
        """Run ``labgrid-client ARGS`` and return what it printed; :class:`LabgridError`."""
        argv = self.argv(*args)
        env = {**os.environ, **(identity or self.identity).environment()}
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False,
                                  env=env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise LabgridError(
                f"'{CLIENT} {' '.join(args)}' did not finish within {timeout:.1f} s"
            ) from None
        except OSError as exc:
            raise LabgridError(f"cannot run {argv[0]}: {exc}") from None
        if len(done.stdout) > _OUTPUT_LIMIT:
            raise LabgridError(
                f"'{CLIENT} {' '.join(args)}' printed more than {_OUTPUT_LIMIT} bytes; refused"
            )
        if done.returncode != 0:
            errors = (done.stderr or done.stdout).decode(errors="replace").strip()
            raise LabgridError(
                f"'{CLIENT} {' '.join(args)}' failed with exit code {done.returncode}: "
                f"{_last_line(errors)}"
            )
        return done.stdout.decode(errors="replace")

    def places(self) -> list[PlaceState]:
        return parse_places(self.run(["-v", "places"]))


def _last_line(text: str) -> str:
    """labgrid's one-line error, not its traceback."""
    lines = [line for line in text.splitlines() if line.strip()]
    useful = [line for line in lines if "Error" in line or "error" in line]
    return (useful or lines or ["(no output)"])[-1][-500:]


class LabgridReservation:
    """One reservation of one place for this process: acquire, reset, hand over."""

    def __init__(self, wanted: LabgridPlace, client: str,
                 identity: LabIdentity | None = None) -> None:
        self.wanted = wanted
        self.lab = LabgridClient(client, wanted.coordinator, identity or LabIdentity.this_process())
        self.token: str | None = None
        self.held: HeldPlace | None = None

    def acquire(self, timeout: float) -> HeldPlace:
        """Reserve, wait at most ``timeout`` s for an allocation, acquire; the place held.

        :class:`LabgridBusy` names who holds the matching places when none came free.
        """
        self.release_stale()
        output = self.lab.run(["reserve", "--shell", *self.wanted.filters])
        match = _TOKEN.search(output)
        if match is None:
            raise LabgridError(
                f"{self.wanted.what}: '{CLIENT} reserve' printed no LG_TOKEN: {output[:200]!r}"
            )
        self.token = match.group(1)
        try:
            try:
                self.lab.run(["wait", self.token], timeout=max(timeout, 0.1))
            except LabgridError as exc:
                raise LabgridBusy(
                    f"{self.wanted.what} was not allocated within {timeout:.1f} s: "
                    f"{self._holders()} (raise --lock-timeout, or free a place: "
                    f"'{CLIENT} -p PLACE release-from HOLDER'); {exc}"
                ) from None
            place = self._allocated_place()
            try:
                self.lab.run(["-p", f"+{self.token}", "acquire"])
            except LabgridError as exc:
                raise LabgridBusy(f"{self.wanted.what}: cannot acquire {place}: {exc}; "
                                  f"{self._holders()}") from None
            self.held = HeldPlace(place, (), LabResources())  # acquired: release() undoes it
            resources = parse_env(self.lab.run(["-p", place, "env"]), place)
            self.held = HeldPlace(place, self._exporters(place), resources)
        except BaseException:
            self.release()
            raise
        return self.held

    def _allocated_place(self) -> str:
        assert self.token is not None
        for state in self.lab.places():
            if state.reservation == self.token:
                return state.name
        raise LabgridError(f"{self.wanted.what}: reservation {self.token} was allocated, but no "
                           "place names it (cancelled by someone else?)")

    def _exporters(self, place: str) -> tuple[str, ...]:
        shown = self.lab.run(["-p", place, "show"])
        found = re.findall(r"^    ([A-Za-z0-9_.-]{1,100})/[^/\s]+/[^/\s]+/[^/\s]+$", shown, re.M)
        return tuple(dict.fromkeys(found))

    def _holders(self) -> str:
        try:
            states = [s for s in self.lab.places() if s.matches(self.wanted)]
        except LabgridError as exc:
            return f"(cannot list the places: {exc})"
        if not states:
            return "no place matches (check the coordinator, the place's name or its tags)"
        return "; ".join(state.describe() for state in states)

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
            if held is not None:
                self.lab.run(["-p", held.name, "release"])

    def release_stale(self) -> list[str]:
        """Release places acquired by dead processes of this host (a ``kill -9``'d run)."""
        host = self.lab.identity.host
        released = []
        for state in self.lab.places():
            holder = LabIdentity.parse(state.acquired or "")
            if holder is None or not holder.is_gone_from(host):
                continue
            if state.reservation is not None:
                try:
                    self.lab.run(["cancel-reservation", state.reservation], identity=holder)
                except LabgridError:
                    pass  # expired meanwhile
            self.lab.run(["-p", state.name, "release-from", holder.owner])
            released.append(state.name)
        return released

