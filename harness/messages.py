"""Requests the host sends and reports devices send back (docs/wire-format.md).

These are plain data; :mod:`harness.wire` turns them into bytes and back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from harness.options import BackendOptions, Option, OptionsMap, OptionValue


class Action(enum.IntEnum):
    """What a request asks the device to do."""

    NONE = 0  # reports only: the request could not be decoded
    LOAD = 1
    EXECUTE = 2
    SET = 3
    GET = 4
    RESET = 5
    REGISTER = 6
    HELLO = 7


class Outcome(enum.IntEnum):
    """How a device disposed of a request as a whole."""

    OK = 0
    REJECTED = 1  # the device's decoder refused the request; detail = WireErrorCode
    RUNTIME_ERROR = 2  # a runtime call outside any one backend failed; detail = Error
    UNSUPPORTED = 3  # the device does not serve this action


ENTRY_FLAG_PROBE = 0x01


@dataclass(frozen=True)
class Request:
    """One request. ``options`` holds the map (LOAD, SET, GET) or the ids (REGISTER)."""

    action: Action
    options: OptionsMap = OptionsMap()
    program: str = ""
    delegates: tuple[str, ...] = ()
    seq: int = 0

    @classmethod
    def load(cls, program: str, delegates: tuple[str, ...], options: OptionsMap) -> Request:
        return cls(Action.LOAD, options, program, tuple(delegates))

    @classmethod
    def register(cls, names: tuple[str, ...]) -> Request:
        """REGISTER probes ``names`` (up to the registry's 16, more than a map's 8)."""
        backends = tuple(BackendOptions(name) for name in names)
        for index, backend in enumerate(backends):
            backend.validate(f"names[{index}]")
        return cls(Action.REGISTER, OptionsMap.unchecked(backends))


@dataclass(frozen=True)
class ReportEntry:
    """What one backend saw and what the runtime returned for it."""

    name: str
    status: int
    calls: int = 0
    executes: int = 0
    flags: int = 0
    options: tuple[Option, ...] = ()

    @property
    def is_probe(self) -> bool:
        """True when ``options`` is exactly what the backend itself received."""
        return bool(self.flags & ENTRY_FLAG_PROBE)


@dataclass(frozen=True)
class Report:
    """A device's answer to one request."""

    action: Action
    outcome: Outcome
    detail: int = 0
    message: str = ""
    facts: tuple[Option, ...] = ()
    entries: tuple[ReportEntry, ...] = ()
    seq: int = 0

    def fact(self, key: str) -> OptionValue | None:
        """The value of fact ``key``, or None."""
        for option in self.facts:
            if option.key == key:
                return option.value
        return None

    def entry(self, name: str) -> ReportEntry | None:
        """The first entry named ``name``, or None."""
        for entry in self.entries:
            if entry.name == name:
                return entry
        return None
