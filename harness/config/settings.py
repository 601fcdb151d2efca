"""One validator for settings read from untrusted files, driven by a frozen dataclass.

:func:`parse_settings` turns a mapping from YAML into an instance of a settings class,
refusing the first bad field with a :class:`ProfileError` that names the file and the
field::

    devices/rpi5.yaml: transport.port: must be an integer; got 'x'

The class's field types say what each value must be; the caller says which fields a
file may set and what rule (a :mod:`harness.untrusted.value_rules` check) each value must also
pass, so settings classes (e.g. a transport's) need not know about files at all.
Supported types: ``str``, ``int``, ``float``, ``bool``, :class:`~pathlib.Path` (relative
to the file's directory), an :class:`enum.Enum` of strings, and any of those ``| None``.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import UsageError
from harness.untrusted.reading import brief
from harness.untrusted.value_rules import ValueRuleError

T = TypeVar("T")
Rule = Callable[[Any], object]  # raises ValueRuleError; what it returns is ignored


class ProfileError(ValueError, UsageError):
    """A device profile is missing or malformed; the message names file and field."""


def refuse(where: str, field: str, message: str) -> ProfileError:
    """The one wording of a refusal: ``FILE: SECTION.FIELD: message``.

    ``where`` is ``FILE: SECTION``, or ``FILE:`` for a top-level field.
    """
    joined = f"{where} {field}" if where.endswith(":") else f"{where}.{field}"
    return ProfileError(f"{joined}: {message}")


def check_known(data: Mapping[str, Any], allowed: Collection[str], where: str) -> None:
    """Refuse the first field of ``data`` (sorted) that is not in ``allowed``."""
    unknown = sorted((key for key in data if key not in allowed), key=str)
    if unknown:
        raise refuse(
            where, str(unknown[0]), f"unknown field; allowed: {', '.join(sorted(allowed))}"
        )


def parse_settings(
    cls: type[T],
    data: Mapping[str, Any],
    where: str,
    *,
    fields: Mapping[str, Rule | None],
    base: Path | None = None,
    required: Mapping[str, str] | None = None,
    also_allowed: Collection[str] = (),
    **given: Any,
) -> T:
    """``cls(**data, **given)`` once every field of ``data`` is checked.

    ``where`` is ``FILE: SECTION`` for messages; ``fields`` maps each field the file may
    set to its rule (or None: its type is enough); ``required`` says what to answer when
    a field without a default is missing; ``base`` is where relative paths start (the
    current directory if None); ``also_allowed`` names fields the caller has already
    taken out of ``data``; ``given`` are the fields the harness fills in. Values are
    kept as the file gives them (a relative path made absolute).
    """
    check_known(data, (*fields, *also_allowed), where)
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]  # a dataclass, by contract
        name = spec.name
        if name not in fields or name in given:
            continue
        if name not in data:
            no_default = (
                spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
            )
            if no_default:
                raise refuse(where, name, (required or {}).get(name, "required"))
            continue
        value = _typed(hints[name], data[name], base, where, name)
        rule = fields[name]
        if rule is not None and value is not None:
            try:
                rule(data[name])
            except ValueRuleError as exc:
                raise refuse(where, name, str(exc)) from None
        values[name] = value
    return cls(**values, **given)


def _typed(hint: Any, value: Any, base: Path | None, where: str, name: str) -> Any:
    """``value`` as ``hint`` says, or the refusal naming ``where.name``."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    (kind,) = [option for option in options if option is not type(None)]
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise refuse(where, name, f"must be true or false; got {brief(value)}")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise refuse(where, name, f"must be an integer; got {brief(value)}")
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        raise refuse(where, name, f"must be a number of seconds; got {brief(value)}")
    if kind is str or kind is Path:
        if not isinstance(value, str):
            raise refuse(where, name, f"must be a string; got {brief(value)}")
        return value if kind is str else (base or Path.cwd()) / Path(value).expanduser()
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        for member in kind:
            if member.value == value:
                return member
        choices = ", ".join(str(member.value) for member in kind)
        raise refuse(where, name, f"{brief(value)} is not one of {choices}")
    raise TypeError(f"{name}: settings of type {kind!r} are not supported")
