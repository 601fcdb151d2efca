"""Requests the host sends and reports devices send back (docs/wire-format.md).

These are plain data; :mod:`harness.codec.wire` turns them into bytes and back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from harness.data.options import BackendOptions, Option, OptionsMap, OptionValue


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
    REBOOT = 8  # a firmware's soft reset: answered, then the board reboots (its boot HELLO)
    # Program upload to a device without a file system (docs/wire-format.md, "Program
    # upload"): bodies of their own, written by harness.codec.wire.program_messages.
    PROGRAM_DATA = 9
    PROGRAM_END = 10


UPLOAD_ACTIONS = frozenset({Action.PROGRAM_DATA, Action.PROGRAM_END})


class Outcome(enum.IntEnum):
    """How a device disposed of a request as a whole."""

    OK = 0
    REJECTED = 1  # the device's decoder refused the request; detail = WireErrorCode
    RUNTIME_ERROR = 2  # a runtime call outside any one backend failed; detail = Error
    UNSUPPORTED = 3  # the device does not serve this action


class LoadPath(enum.IntEnum):
    """Which runtime entry point a LOAD passes its map through (docs/wire-format.md)."""

    PROGRAM = 0  # Program::load_method(method, ..., &map)
    MODULE = 1  # Module::load(map), then the method is loaded lazily without a map
    MODULE_METHOD = 2  # Module::load(), then Module::load_method(method, ..., &map)
    MODULE_BOTH = 3  # Module::load(stored map), then load_method(method, ..., &explicit map)

    @property
    def label(self) -> str:
        """The name HELLO's ``load_paths`` fact and test ids use, e.g. ``module_method``."""
        return self.name.lower()

    @classmethod
    def from_label(cls, label: str) -> LoadPath:
        """The path named ``label``; ValueError naming the known paths otherwise."""
        for path in cls:
            if path.label == label:
                return path
        raise ValueError(f"unknown load path {label!r}; known: {', '.join(p.label for p in cls)}")


ENTRY_FLAG_PROBE = 0x01
LOAD_FLAG_KEEP = 0x01  # LOAD: load into the program or module already loaded
LOAD_FLAG_CONCURRENT = 0x02  # LOAD: load every model in its own thread, started together
MAX_MODELS = 8  # load specifications in one LOAD request (the first and 7 further ones)


@dataclass(frozen=True)
class LoadSpec:
    """One further model of a LOAD request: its program, delegates and maps
    (fields as :class:`Request`'s own LOAD fields; a further model has no flags)."""

    program: str
    delegates: tuple[str, ...]
    options: OptionsMap = field(default_factory=OptionsMap)
    path: LoadPath = LoadPath.PROGRAM
    method: str = ""
    method_options: OptionsMap = field(default_factory=OptionsMap)

    @property
    def delivered(self) -> OptionsMap:
        """The map this model's delegates must receive (as :attr:`Request.delivered`)."""
        return self.method_options if self.path is LoadPath.MODULE_BOTH else self.options


@dataclass(frozen=True)
class Request:
    """One request. ``options`` holds the map (LOAD, SET, GET) or the ids (REGISTER).

    LOAD only: ``path`` is the entry point the map goes through; ``options`` is the
    map of the path's first call that takes one (``Program::load_method``,
    ``Module::load`` or, on ``module_method``, ``Module::load_method``);
    ``method_options`` is ``module_both``'s explicit map for ``Module::load_method``
    (empty there means an explicit empty map). ``keep`` loads ``method`` into the
    program or module already loaded instead of a fresh one; ``method`` "" is
    ``forward``. ``delegates`` are the delegate ids of that method. ``models`` are
    the further models of the same LOAD (model 1, 2, ...; the request's own fields
    are model 0), ``concurrent`` loads all of them in threads started together.
    """

    action: Action
    options: OptionsMap = field(default_factory=OptionsMap)
    program: str = ""
    delegates: tuple[str, ...] = ()
    seq: int = 0
    path: LoadPath = LoadPath.PROGRAM
    keep: bool = False
    method: str = ""
    method_options: OptionsMap = field(default_factory=OptionsMap)
    models: tuple[LoadSpec, ...] = ()
    concurrent: bool = False

    @classmethod
    def load(
        cls,
        program: str,
        delegates: tuple[str, ...],
        options: OptionsMap,
        *,
        path: LoadPath = LoadPath.PROGRAM,
        method_options: OptionsMap | None = None,
        keep: bool = False,
        method: str = "",
        models: tuple[LoadSpec, ...] = (),
        concurrent: bool = False,
    ) -> Request:
        return cls(
            Action.LOAD,
            options,
            program,
            tuple(delegates),
            0,
            path,
            keep,
            method,
            method_options if method_options is not None else OptionsMap(),
            tuple(models),
            concurrent,
        )

    @property
    def delivered(self) -> OptionsMap:
        """The map the method's delegates must receive: on ``module_both`` the explicit
        one, which replaces the stored map wholly; otherwise ``options``."""
        if self.action is Action.LOAD and self.path is LoadPath.MODULE_BOTH:
            return self.method_options
        return self.options

    @classmethod
    def register(cls, names: tuple[str, ...]) -> Request:
        """REGISTER probes ``names`` (up to the registry's 16, more than a map's 8)."""
        backends = tuple(BackendOptions(name) for name in names)
        for index, backend in enumerate(backends):
            backend.validate(f"names[{index}]")
        return cls(Action.REGISTER, OptionsMap.unchecked(backends))


@dataclass(frozen=True)
class ReportEntry:
    """What one backend saw and what the runtime returned for it; ``model`` is the
    LOAD's model (0 = the request's own load fields) whose program instance it was in."""

    name: str
    status: int
    calls: int = 0
    executes: int = 0
    flags: int = 0
    options: tuple[Option, ...] = ()
    model: int = 0

    @property
    def is_probe(self) -> bool:
        """True when ``options`` is exactly what the backend itself received."""
        return bool(self.flags & ENTRY_FLAG_PROBE)

    @property
    def is_recorded(self) -> bool:
        """True for a real backend's entry carrying the agent's records of its calls
        (wire-format.md, "Records"): :attr:`delivered` is what its hook was handed."""
        return _record_marker(self.options) is not None

    @property
    def is_observed(self) -> bool:
        """A probe's or a recorded real backend's entry: what the backend received is known."""
        return self.is_probe or self.is_recorded

    @property
    def delivered(self) -> tuple[Option, ...]:
        """What the backend's hook was handed: a recorded entry's options before its
        annotations, otherwise every option."""
        marker = _record_marker(self.options)
        return self.options if marker is None else self.options[:marker]

    @property
    def caller_received(self) -> tuple[Option, ...] | None:
        """A recorded GET entry's other end: the span as the runtime's ``get_option``
        handed it back to its caller (the agent), where :attr:`delivered` is the span as
        the backend's own call left it; None for an entry without it (wire-format.md,
        "Records")."""
        marker = _record_marker(self.options)
        if marker is None:
            return None
        start = marker + 2  # after the marker and etb.returned
        for index in range(len(self.options) - 1, start - 1, -1):
            option = self.options[index]
            if option.key == RECORD_CALLER and type(option.value) is int:
                if index - option.value == start:
                    return self.options[start:index]
        return None

    @property
    def backend_status(self) -> int | None:
        """A recorded entry's ``etb.returned``: the first ``Error`` other than Ok the
        backend's own hooks returned (0 if none); None when not recorded."""
        return self._annotation(RECORD_RETURNED)

    @property
    def compile_specs(self) -> tuple[tuple[str, int], ...]:
        """A recorded LOAD entry's compile-spec keys with their values' sizes in bytes."""
        marker = _record_marker(self.options)
        if marker is None:
            return ()
        return tuple(
            (o.key.removeprefix(RECORD_COMPILE_SPEC), o.value)
            for o in self.options[marker + 1 :]
            if o.key.startswith(RECORD_COMPILE_SPEC) and type(o.value) is int
        )

    def _annotation(self, key: str) -> int | None:
        marker = _record_marker(self.options)
        if marker is None:
            return None
        for option in self.options[marker + 1 :]:
            if option.key == key and type(option.value) is int:
                return option.value
        return None


RECORD_MARKER = "etb.recorded"
"""The option that ends what a recorded real backend was handed; its int value is its
own index, i.e. how many options precede it (wire-format.md, "Records")."""
RECORD_RETURNED = "etb.returned"
RECORD_COMPILE_SPEC = "etb.compile_spec:"
RECORD_CALLER = "etb.caller"
"""GET: ends the span the caller received, which follows ``etb.returned``; its int value
is how many options that span holds."""


def _record_marker(options: tuple[Option, ...]) -> int | None:
    """The index of a recorded entry's marker: the last ``etb.recorded`` whose value is
    its own index, or None."""
    for index in range(len(options) - 1, -1, -1):
        option = options[index]
        if option.key == RECORD_MARKER and type(option.value) is int and option.value == index:
            return index
    return None


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
