"""The coordinator's view of a lab: who holds which place.

:func:`place_state` checks one place as labgrid's client session copied it
(:mod:`harness.lab.client_session`): name, tags, comment, holder, reservation and
exporters, each by the harness's value rules. A place that fails them is
that place's problem (:class:`BadPlace`): it is left out, and the others go on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.errors import InfrastructureError
from harness.untrusted.reading import brief, printable
from harness.untrusted.value_rules import ValueRuleError, check_word

if TYPE_CHECKING:
    from harness.lab.client_session import RawPlace

MAX_COMMENT_CHARS = 1000  # longer is cut: a comment is only shown
MAX_TAGS = 64
_TAG_KEY = re.compile(r"[a-z][a-z0-9_]{0,63}")  # labgrid's tag key rule, bounded


class BadPlace(ValueError, InfrastructureError):
    """A place whose data fails the value rules; the message names the place, the field
    and the fix. The place is never chosen; every other place goes on."""


@dataclass(frozen=True)
class PlaceState:
    """One place as the coordinator sent it, checked."""

    name: str
    tags: tuple[tuple[str, str], ...]
    acquired: str | None  # HOST/USER of the holder
    reservation: str | None  # the token it is allocated to
    comment: str = ""
    exporters: tuple[str, ...] = ()  # the exporters its matches name

    def has_tags(self, wanted: Mapping[str, str]) -> bool:
        return set(wanted.items()) <= set(self.tags)

    def describe(self) -> str:
        held = f"acquired by {self.acquired}" if self.acquired else "not acquired"
        reserved = f", allocated to reservation {self.reservation}" if self.reservation else ""
        comment = f", comment: {self.comment}" if self.comment else ""
        return f"{self.name} ({held}{reserved}{comment})"


def place_state(raw: RawPlace, coordinator: str = "COORDINATOR") -> PlaceState:
    """``raw`` checked by the value rules; :class:`BadPlace` names place, field and fix
    (at ``coordinator``)."""
    try:
        name = check_word(raw.name, "a place name")
    except ValueRuleError as exc:
        raise BadPlace(f"labgrid place {brief(raw.name)}: name: {exc}") from None
    where, fix = f"labgrid place {name!r}", _fix(name, coordinator)
    if len(raw.tags) > MAX_TAGS:
        raise BadPlace(f"{where}: tags: {len(raw.tags)} tags, limit {MAX_TAGS}; {fix}")
    tags = []
    for key, value in raw.tags:
        if not isinstance(key, str) or not _TAG_KEY.fullmatch(key):
            raise BadPlace(
                f"{where}: tags: key {brief(key)} is not [a-z][a-z0-9_]* (at most 64); {fix}"
            )
        try:
            tags.append((key, check_word(value, f"tag {key}")))
        except ValueRuleError as exc:
            raise BadPlace(f"{where}: tags.{key}: {exc}; {fix}") from None
    comment = raw.comment if isinstance(raw.comment, str) else ""
    holder = _optional_word(raw.acquired, where, "acquired")
    reservation = _optional_word(raw.reservation, where, "reservation")
    exporters = []
    for exporter, *_ in raw.matches:
        try:
            exporters.append(check_word(exporter, "an exporter name"))
        except ValueRuleError as exc:
            raise BadPlace(f"{where}: matches: {exc}") from None
    return PlaceState(
        name,
        tuple(sorted(tags)),
        holder,
        reservation,
        printable(comment[:MAX_COMMENT_CHARS]),
        tuple(dict.fromkeys(exporters)),
    )


def _optional_word(value: object, where: str, field: str) -> str | None:
    if value in (None, ""):
        return None
    try:
        return check_word(value, field)
    except ValueRuleError as exc:
        raise BadPlace(f"{where}: {field}: {exc}") from None


def _fix(place: str, coordinator: str) -> str:
    return f"correct it: 'labgrid-client -x {coordinator} -p {place} set-tags KEY=VALUE'"
