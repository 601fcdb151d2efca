"""The coordinator's view of a lab: who holds which place, and which holders are runs.

:class:`LabIdentity` is one harness process as a labgrid owner
(``HOST/USER-pidPID-START``); :func:`parse_places` reads ``labgrid-client -v places``
(tags, holder, reservation, comment, matches of each place). Both are read from the
coordinator's text, so both are parsed narrowly, line by line.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.errors import InfrastructureError
from harness.lifecycle.reap import start_time

if TYPE_CHECKING:
    from harness.farm.labgrid import LabgridPlace

# ---- identities ------------------------------------------------------------------------------

_IDENTITY = re.compile(
    r"(?P<host>[^/]+)/(?P<user>.+)-pid(?P<pid>[0-9]{1,10})-(?P<start>[0-9]{1,20})"
)


@dataclass(frozen=True)
class LabIdentity:
    """One process as a labgrid owner: ``HOST/USER-pidPID-START``."""

    host: str
    user: str
    pid: int
    start: int

    @classmethod
    def this_process(cls) -> LabIdentity:
        """This process, with the host and user labgrid itself would use.

        Those are LG_HOSTNAME and LG_USERNAME when set.
        """
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
_FIELD_LINE = re.compile(r"  (?P<key>[a-z][a-z ]{0,39}): ?(?P<value>.*)")
_MAX_VALUE_CHARS = 1000  # of a field; a longer comment is cut, a longer other field refused
# The fields labgrid's Place.show() prints, in its order, each at most once (26.0.1). A
# comment or tag holding a line break prints lines that look like fields; one seen twice
# or out of this order is such a line, and the harness will not guess which is real.
_FIELD_ORDER = (
    "aliases",
    "comment",
    "tags",
    "matches",
    "acquired",
    "acquired resources",
    "allowed",
    "created",
    "changed",
    "reservation",
)


class PlaceListError(ValueError, InfrastructureError):
    """The coordinator's list of places cannot be read unambiguously; the message names
    the place, the field and the fix."""


_MATCH_LINE = re.compile(r"    [A-Za-z0-9_.*?-]{1,100}(/[A-Za-z0-9_.*?-]{1,100}){2,3}( -> \S+)?")


@dataclass(frozen=True)
class PlaceState:
    """One place as ``labgrid-client -v places`` shows it."""

    name: str
    tags: tuple[tuple[str, str], ...]
    acquired: str | None  # HOST/USER of the holder
    reservation: str | None  # the token it is allocated to
    comment: str = ""
    patterns: tuple[str, ...] = ()  # its matches, exporter/group/class[/name]

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
    names: set[str] = set()
    for block in re.split(r"^(?=Place ')", text, flags=re.MULTILINE):
        lines = block.splitlines()
        start = _PLACE_LINE.fullmatch(lines[0]) if lines else None
        if start is None:
            continue
        name = start["name"]
        if name in names:
            raise _ambiguous(name, "Place", "listed twice")
        names.add(name)
        fields: dict[str, str] = {}
        patterns: list[str] = []
        key = ""
        for line in lines[1:]:
            field = _FIELD_LINE.fullmatch(line)
            if field is None:
                if key == "matches" and _MATCH_LINE.fullmatch(line):
                    patterns.append(line.strip())
                continue
            key = field["key"]
            if key not in _FIELD_ORDER:
                continue  # a field of another labgrid version
            if key in fields:
                raise _ambiguous(name, key, "listed twice")
            if any(_FIELD_ORDER.index(seen) > _FIELD_ORDER.index(key) for seen in fields):
                raise _ambiguous(name, key, "listed out of labgrid's order")
            value = field["value"].strip()
            if len(value) > _MAX_VALUE_CHARS and key != "comment":
                raise PlaceListError(
                    f"labgrid place {name!r}: {key}: {len(value)} characters, limit "
                    f"{_MAX_VALUE_CHARS}; shorten what the lab set there (tags: "
                    f"labgrid-client -p {name} set-tags KEY=VALUE)"
                )
            fields[key] = value[:_MAX_VALUE_CHARS]
        tags = tuple(
            sorted(
                (k, v)
                for k, _, v in (pair.partition("=") for pair in fields.get("tags", "").split(", "))
                if v
            )
        )
        if len(dict(tags)) != len(tags):
            raise _ambiguous(name, "tags", "a key listed twice")
        places.append(
            PlaceState(
                name,
                tags,
                _none(fields.get("acquired")),
                _none(fields.get("reservation")),
                _printable(fields.get("comment", "")),
                tuple(patterns),
            )
        )
    return places


def _ambiguous(place: str, field: str, how: str) -> PlaceListError:
    """A field line that a comment or tag with a line break printed; ``field`` 'Place': a
    place line, printed by a place listed before it."""
    whose = f"place {place!r}" if field != "Place" else "the place listed before it"
    return PlaceListError(
        f"labgrid place {place!r}: {field}: {how} in 'labgrid-client -v places': a comment "
        f"or tag of {whose} holds a line break, and the harness will not guess which line is "
        "the field; remove the line break (labgrid-client -p PLACE set-comment '', or "
        "set-tags KEY=VALUE)"
    )


def _printable(text: str) -> str:
    """Lab text as it may reach a terminal: anything not printable (escapes) shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _none(value: str | None) -> str | None:
    return None if value in (None, "", "None") else value
