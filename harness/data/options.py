"""The backend options map: for each backend id, an ordered list of options.

Values are exactly ``bool``, 32-bit signed ``int`` or UTF-8 ``str``, as in the
runtime's ``BackendOption`` (runtime/backend/options.h). Constructing an
:class:`OptionsMap` validates it against the runtime's limits; every error names
the backend, the key, the limit and the offending value. Negative tests build
out-of-spec maps on purpose with :meth:`OptionsMap.unchecked`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.errors import UsageError
from harness.untrusted.reading import brief

OptionValue = bool | int | str

MAX_KEY_BYTES = 63  # kMaxOptionKeyLength - 1 (NUL)
MAX_STRING_BYTES = 255  # kMaxOptionValueLength - 1 (NUL)
MAX_ID_BYTES = 63  # LoadBackendOptionsMap backend id
MAX_LOAD_BACKENDS = 8  # LoadBackendOptionsMap capacity
MAX_OPTIONS_PER_BACKEND = 64  # wire format v2
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


class OptionType(enum.IntEnum):
    """Option value types, numbered as their wire-format tags."""

    BOOL = 1
    INT = 2
    STRING = 3

    @classmethod
    def of(cls, value: object) -> OptionType:
        """The type of a Python value; ``bool`` is never taken for ``int``."""
        if type(value) is bool:
            return cls.BOOL
        if type(value) is int:
            return cls.INT
        if type(value) is str:
            return cls.STRING
        raise TypeError(
            f"type {type(value).__name__} is not an option type; use bool, int (32-bit) or str"
        )


class MapValidationError(ValueError, UsageError):
    """An options map breaks a runtime limit.

    ``path`` locates the bad entry (``backends.XnnpackBackend[2].value``);
    :func:`harness.codec.mapfile.load_map` prefixes it with the file name.
    """

    def __init__(self, path: str, problem: str, value: object) -> None:
        self.path = path
        self.problem = problem
        self.value = value
        super().__init__(f"{path}: {problem}; got {brief(value)}")


def backend_path(backend_id: object, limit: int = 80) -> str:
    """``backends.<id>``, the path of a backend's entry in errors; an id too long to read
    (a file can hold one of a megabyte) is cut to ``limit`` characters, and control
    characters (which could rewrite the terminal) are escaped."""
    text = backend_id[: limit + 1] if isinstance(backend_id, str) else brief(backend_id)
    if not text.isprintable():
        text = repr(text)[1:-1]
    return f"backends.{text if len(text) <= limit else text[:limit] + '...'}"


def _utf8_len(text: str, path: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise MapValidationError(
            path, f"not encodable as UTF-8 ({exc.reason}); remove lone surrogates", text
        ) from None


def _check_text(text: object, path: str, what: str, lo: int, hi: int, fix: str) -> None:
    if type(text) is not str:
        raise MapValidationError(path, f"{what} must be a str", text)
    size = _utf8_len(text, path)
    if not lo <= size <= hi:
        raise MapValidationError(
            path, f"{what} is {size} bytes of UTF-8, limit {lo}..{hi} bytes; {fix}", text
        )
    if "\0" in text:
        raise MapValidationError(
            path, f"{what} contains a NUL byte, which the runtime's C strings cannot hold", text
        )


@dataclass(frozen=True)
class Option:
    """One ``key -> value`` option. ``type`` follows the value's Python type exactly."""

    key: str
    value: OptionValue

    def __eq__(self, other: object) -> bool:
        # Python has True == 1; the runtime's bool and int options differ, and so must these.
        if not isinstance(other, Option):
            return NotImplemented
        return (self.key, type(self.value), self.value) == (
            other.key,
            type(other.value),
            other.value,
        )

    def __hash__(self) -> int:
        return hash((self.key, type(self.value), self.value))

    @property
    def type(self) -> OptionType:
        return OptionType.of(self.value)

    def validate(self, path: str) -> None:
        """Raise :class:`MapValidationError` if this option breaks a runtime limit."""
        _check_text(self.key, f"{path}.key", "key", 1, MAX_KEY_BYTES, "shorten the key")
        try:
            kind = OptionType.of(self.value)
        except TypeError as exc:
            raise MapValidationError(f"{path}.value", str(exc), self.value) from None
        if type(self.value) is int and not INT32_MIN <= self.value <= INT32_MAX:
            raise MapValidationError(
                f"{path}.value",
                f"int option {self.key!r} is outside int32 "
                f"({INT32_MIN}..{INT32_MAX}), the runtime's int",
                self.value,
            )
        if kind is OptionType.STRING:
            _check_text(
                self.value,
                f"{path}.value",
                f"string option {self.key!r}",
                0,
                MAX_STRING_BYTES,
                "the runtime would truncate it: shorten the value",
            )


@dataclass(frozen=True)
class BackendOptions:
    """The options for one backend id, in the order they are delivered."""

    backend_id: str
    options: tuple[Option, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))

    def validate(self, path: str) -> None:
        """Raise :class:`MapValidationError` for a bad id, option or duplicate key."""
        _check_text(
            self.backend_id,
            path,
            "backend id",
            1,
            MAX_ID_BYTES,
            "use the backend's registered name",
        )
        if len(self.options) > MAX_OPTIONS_PER_BACKEND:
            raise MapValidationError(
                path,
                f"backend {self.backend_id!r} has {len(self.options)} options, "
                f"limit {MAX_OPTIONS_PER_BACKEND} per backend (wire format v2); split the map",
                len(self.options),
            )
        seen: dict[str, int] = {}
        for index, option in enumerate(self.options):
            option_path = f"{path}[{index}]"
            option.validate(option_path)
            if option.key in seen:
                raise MapValidationError(
                    f"{option_path}.key",
                    f"backend {self.backend_id!r} has key {option.key!r} twice "
                    f"(first at [{seen[option.key]}]); each key may appear once",
                    option.key,
                )
            seen[option.key] = index

    def get(self, key: str) -> OptionValue | None:
        """The value of ``key``, or None."""
        for option in self.options:
            if option.key == key:
                return option.value
        return None


@dataclass(frozen=True)
class OptionsMap:
    """Backend id -> options, as handed to ``LoadBackendOptionsMap``.

    Validated on construction. ``OptionsMap.unchecked(...)`` skips validation
    (``checked`` is then False) for tests that must send out-of-spec maps.
    """

    backends: tuple[BackendOptions, ...] = ()
    checked: bool = field(default=True, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "backends", tuple(self.backends))
        if self.checked:
            self.validate()

    @classmethod
    def unchecked(cls, backends: Iterable[BackendOptions]) -> OptionsMap:
        """A map that is not validated: for deliberately out-of-spec requests."""
        return cls(tuple(backends), checked=False)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Mapping[str, OptionValue] | Sequence[tuple[str, OptionValue]]],
        *,
        checked: bool = True,
    ) -> OptionsMap:
        """Build from ``{backend: {key: value}}`` or ``{backend: [(key, value), ...]}``."""
        backends = []
        for backend_id, options in data.items():
            pairs = options.items() if isinstance(options, Mapping) else options
            backends.append(BackendOptions(backend_id, tuple(Option(k, v) for k, v in pairs)))
        return cls(tuple(backends), checked=checked)

    def validate(self) -> None:
        """Raise :class:`MapValidationError` for the first limit this map breaks."""
        if len(self.backends) > MAX_LOAD_BACKENDS:
            raise MapValidationError(
                "backends",
                f"{len(self.backends)} backends, limit {MAX_LOAD_BACKENDS} "
                "(LoadBackendOptionsMap capacity); split the map",
                [b.backend_id for b in self.backends],
            )
        seen: set[str] = set()
        for backend in self.backends:
            path = backend_path(backend.backend_id)
            backend.validate(path)
            if backend.backend_id in seen:
                raise MapValidationError(
                    path,
                    f"backend {backend.backend_id!r} appears twice; merge its options",
                    backend.backend_id,
                )
            seen.add(backend.backend_id)

    @property
    def backend_ids(self) -> tuple[str, ...]:
        return tuple(b.backend_id for b in self.backends)

    def for_backend(self, backend_id: str) -> BackendOptions | None:
        """This map's entry for ``backend_id``, or None."""
        for backend in self.backends:
            if backend.backend_id == backend_id:
                return backend
        return None

    def to_dict(self) -> dict[str, list[tuple[str, OptionValue]]]:
        """``{backend: [(key, value), ...]}``, order kept."""
        return {b.backend_id: [(o.key, o.value) for o in b.options] for b in self.backends}
