"""One validator for settings read from untrusted files, driven by a frozen dataclass.

:func:`parse_settings` turns a mapping from YAML into an instance of a settings class,
refusing the first bad field with a :class:`ProfileError` that names the file and the
field::

    devices/rpi5.yaml: transport.port: must be an integer; got 'x'

The class's field types say what each value must be; the caller says which fields a
file may set and what rule (a :mod:`harness.untrusted.value_rules` check) each value must also
pass, so settings classes (e.g. a transport's) need not know about files at all.
Supported types: ``str``, ``int``, ``float``, ``bool``, :class:`~pathlib.Path` (relative
to the file's directory), an :class:`enum.Enum` of strings, any of those ``| None``, a
list of one of them (``tuple[str, ...]``, refusals name ``field[2]``), a map from strings
to one of them (``Mapping[str, str]``, refusals name ``field.KEY``) and a nested section
(another settings dataclass, whose fields :class:`Field` ``section`` gives). Rules that
relate fields to each other run after it, in the caller.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import UsageError
from harness.untrusted.reading import brief, brief_plain
from harness.untrusted.value_rules import ValueRuleError, check_path_fits, expand_home

T = TypeVar("T")
Rule = Callable[[Any], object]  # raises ValueRuleError; what it returns is ignored


@dataclass(frozen=True)
class Field:
    """What a field must pass beyond its type, when a bare rule does not say enough."""

    rule: Rule | None = None  # the value; each item of a list, each value of a map
    key: Rule | None = None  # each key of a map
    means: str | None = None  # for a value of the wrong type: "must be MEANS; got ..."
    section: Mapping[str, Spec] | None = None  # a nested section: its own fields
    later: bool = False  # allowed here; a rule after the validator reads it


Spec = Field | Rule | None


class ProfileError(ValueError, UsageError):
    """A device profile is missing or malformed; the message names file and field."""


def _joined(where: str, field: str) -> str:
    return f"{where} {field}" if where.endswith(":") else f"{where}.{field}"


def refuse(where: str, field: str, message: str) -> ProfileError:
    """The one wording of a refusal: ``FILE: SECTION.FIELD: message``.

    ``where`` is ``FILE: SECTION``, or ``FILE:`` for a top-level field.
    """
    return ProfileError(f"{_joined(where, field)}: {message}")


def one_of(choices: Collection[str], note: str = "") -> Rule:
    """The rule of a string field that takes one of ``choices`` (``note`` says more)."""

    def check(value: object) -> None:
        if value not in choices:
            raise ValueRuleError(
                f"{brief(value)} is not one of {', '.join(choices)}{f' ({note})' if note else ''}"
            )

    return check


def check_known(
    data: Mapping[str, Any], allowed: Collection[str], where: str, none_allowed: str = ""
) -> None:
    """Refuse the first field of ``data`` (sorted as text: a file's keys may be of any
    type) that is not in ``allowed``; ``none_allowed`` says why when ``allowed`` is empty."""
    unknown = sorted((key for key in data if key not in allowed), key=str)
    if unknown:
        told = f"allowed: {', '.join(sorted(allowed))}" if allowed else none_allowed
        raise refuse(where, brief_plain(unknown[0]), f"unknown field; {told}")


def parse_settings(
    cls: type[T],
    data: Mapping[str, Any],
    where: str,
    *,
    fields: Mapping[str, Spec],
    base: Path | None = None,
    required: Mapping[str, str] | None = None,
    also_allowed: Collection[str] = (),
    **given: Any,
) -> T:
    """``cls(**data, **given)`` once every field of ``data`` is checked.

    ``where`` is ``FILE: SECTION`` for messages; ``fields`` maps each field the file may
    set to its rule, a :class:`Field`, or None (its type is enough); ``required`` says
    what to answer when a field without a default is missing; ``base`` is where relative
    paths start (the current directory if None); ``also_allowed`` names fields the caller
    has already taken out of ``data``; ``given`` are the fields the harness fills in.
    Values are kept as the file gives them (a relative path made absolute).
    """
    check_known(data, (*fields, *also_allowed), where)
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]  # a dataclass, by contract
        name = spec.name
        field = _as_field(fields.get(name))
        if name not in fields or name in given or field.later:
            continue
        if name not in data:
            no_default = (
                spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
            )
            if no_default:
                raise refuse(where, name, (required or {}).get(name, "required"))
            continue
        values[name] = _Reading(base, where).typed(hints[name], data[name], name, field)
    return cls(**values, **given)


def _as_field(spec: Spec) -> Field:
    return spec if isinstance(spec, Field) else Field(rule=spec)


@dataclass(frozen=True)
class _Reading:
    """Values of one section: ``where`` names it, relative paths start at ``base``."""

    base: Path | None
    where: str

    def typed(self, hint: Any, value: Any, name: str, field: Field) -> Any:
        """``value`` as ``hint`` says and ``field``'s rules allow, or the refusal."""
        options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if value is None and type(None) in options:
            return None
        (kind,) = [option for option in options if option is not type(None)]
        origin = typing.get_origin(kind)
        if origin is tuple:
            return self._items(typing.get_args(kind)[0], value, name, field)
        if origin is Mapping or origin is dict:
            return self._map(typing.get_args(kind)[1], value, name, field)
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            if not isinstance(value, dict):
                means = field.means or f"a mapping of {', '.join(field.section or ())}"
                raise refuse(self.where, name, f"must be {means}; got {brief(value)}")
            return parse_settings(
                kind, value, _joined(self.where, name), fields=field.section or {}, base=self.base
            )
        typed = self._scalar(kind, value, name, field.means)
        self._check(field.rule, value, name)
        return typed

    def _items(self, kind: Any, value: Any, name: str, field: Field) -> tuple[Any, ...]:
        if not isinstance(value, list):
            means = field.means or f"a list of {_plural(kind)}"
            raise refuse(self.where, name, f"must be {means}; got {brief(value)}")
        items = []
        for index, item in enumerate(value):
            items.append(self._scalar(kind, item, f"{name}[{index}]", None))
            self._check(field.rule, item, f"{name}[{index}]")
        return tuple(items)

    def _map(self, kind: Any, value: Any, name: str, field: Field) -> dict[str, Any]:
        if not isinstance(value, dict):
            means = field.means or f"a mapping of names to {_plural(kind)}"
            raise refuse(self.where, name, f"must be {means}; got {brief(value)}")
        entries = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise refuse(self.where, name, f"names must be strings; got {brief(key)}")
            entry = f"{name}.{brief_plain(key)}"
            self._check(field.key, key, entry)
            entries[key] = self._scalar(kind, item, entry, None)
            self._check(field.rule, item, entry)
        return entries

    def _check(self, rule: Rule | None, value: Any, name: str) -> None:
        if rule is not None and value is not None:
            try:
                rule(value)
            except ValueRuleError as exc:
                raise refuse(self.where, name, str(exc)) from None

    def _scalar(self, kind: Any, value: Any, name: str, means: str | None) -> Any:
        """``value`` as the scalar type ``kind``; ``means`` replaces the wrong-type wording."""

        def wrong(default: str) -> ProfileError:
            return refuse(self.where, name, f"must be {means or default}; got {brief(value)}")

        if kind is bool:
            if isinstance(value, bool):
                return value
            raise wrong("true or false")
        if kind is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise wrong("an integer")
        if kind is float:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return value
            raise wrong("a number of seconds")
        if kind is str or kind is Path:
            if not isinstance(value, str):
                raise wrong("a string")
            if "\0" in value:
                raise refuse(
                    self.where,
                    name,
                    f"{brief(value)} holds a NUL byte, which no path, argument or "
                    "environment value can hold; remove it",
                )
            if kind is str:
                return value
            try:
                check_path_fits(value)
                return (self.base or Path.cwd()) / expand_home(value)
            except ValueRuleError as exc:
                raise refuse(self.where, name, str(exc)) from None
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            for member in kind:
                if member.value == value:
                    return member
            choices = ", ".join(str(member.value) for member in kind)
            raise refuse(self.where, name, f"{brief(value)} is not one of {choices}")
        raise TypeError(f"{name}: settings of type {kind!r} are not supported")


def _plural(kind: Any) -> str:
    """``strings`` for ``str``: what a list or map of ``kind`` holds, for messages."""
    words = {
        str: "strings",
        int: "integers",
        float: "numbers",
        bool: "true or false",
        Path: "paths",
    }
    return words.get(kind, "values")
