"""Options map files: the YAML or JSON documents users write (docs/map-files.md).

A backend's options are a mapping of key to value (the common case), or a list of
``{key, value[, type][, effect, tolerance, when]}`` entries (where a value's type is
pinned, or what the option may change is declared: :mod:`harness.data.effects`); both
keep the order::

    backends:
      XnnpackBackend: {workspace_sharing_mode: 1, weight_cache_enabled: true}
      NpuBackend:
        - {key: cache_dir, value: /data/local/tmp/cache, type: string}
        - {key: fast_math, value: true, effect: numerics, tolerance: 0.001}

Every error is a :class:`MapFileError` whose message starts with the file name and
the bad entry's path (``backends.XnnpackBackend[1].value``) or line, and says how to
fix it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.codec.strict_yaml import MAX_NUMBER_CHARS, YamlError, read_yaml
from harness.data.effects import FIELDS as EFFECT_FIELDS
from harness.data.effects import DeclaredEffect, EffectFieldError, parse_effect
from harness.data.options import (
    BackendOptions,
    MapValidationError,
    Option,
    OptionsMap,
    backend_path,
)
from harness.errors import UsageError
from harness.untrusted.reading import InputFileError, brief, brief_plain, read_bounded_text

_OPTION_FIELDS = ("key", "value", "type", *EFFECT_FIELDS)
_TYPES = {"bool": bool, "int": int, "string": str}
_KINDS: dict[type, str] = {dict: "mapping", str: "string"}  # YAML's names where Python's differ


class MapFileError(YamlError):
    """A map file that cannot be read or is not a valid map.

    ``source`` is the file name, ``location`` the entry path or line (or None),
    ``problem`` what is wrong and how to fix it.
    """


def _read_yaml(text: str, source: str) -> object:
    try:
        return read_yaml(text, source)
    except YamlError as exc:
        raise MapFileError(exc.source, exc.location, exc.problem) from None


def _read_json(text: str, source: str) -> object:
    def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise MapFileError(
                    source,
                    None,
                    f"key {brief(key)} appears twice in one JSON object; merge or rename them",
                )
            seen.add(key)
        return dict(pairs)

    def bounded_int(digits: str) -> int:
        if len(digits) > MAX_NUMBER_CHARS:
            raise MapFileError(
                source,
                None,
                f"the number {brief(digits)} is {len(digits)} characters long, limit "
                f"{MAX_NUMBER_CHARS}: no option takes a number that large; quote it for a string",
            )
        return int(digits)

    try:
        return json.loads(text, object_pairs_hook=unique, parse_int=bounded_int)
    except json.JSONDecodeError as exc:
        raise MapFileError(
            source, f"line {exc.lineno}, column {exc.colno}", f"not valid JSON: {exc.msg}"
        ) from None
    except RecursionError:
        raise MapFileError(
            source,
            None,
            "nested too deeply for the JSON reader (it allows about a thousand levels; a map "
            "file needs 4): remove the extra brackets",
        ) from None


_READERS = {".yaml": _read_yaml, ".yml": _read_yaml, ".json": _read_json}


Declared = dict[tuple[str, str], DeclaredEffect]  # (backend, key): the map's declaration


@dataclass(frozen=True)
class MapFile:
    """A map and the effects its options declare (list form: ``effect``, ``tolerance``,
    ``when``), by (backend, key)."""

    options: OptionsMap
    effects: Mapping[tuple[str, str], DeclaredEffect] = dataclasses.field(default_factory=dict)


def load_map(path: str | os.PathLike[str]) -> OptionsMap:
    """Read and validate a map file; ``.yaml``/``.yml`` or ``.json`` by suffix.

    Only a regular file of at most 1 MiB is read (harness.untrusted.reading).
    """
    return read_map_file(path).options


def read_map_file(path: str | os.PathLike[str]) -> MapFile:
    """:func:`load_map`, with the effects the map's options declare."""
    source = str(path)
    reader = _READERS.get(Path(path).suffix.lower())
    if reader is None:
        raise MapFileError(
            source,
            None,
            f"unknown suffix {Path(path).suffix!r}; name the file .yaml, .yml or .json",
        )
    try:
        text = read_bounded_text(path)
    except InputFileError as exc:
        raise MapFileError(exc.source, exc.location, exc.problem) from None
    declared: Declared = {}
    return MapFile(_parse(reader(text, source), source, declared), declared)


def _describe(value: object) -> str:
    """``null``, ``bool true``, ``float 1.5``, ``mapping {'a': 1}``: as a map author sees it."""
    if value is None:
        return "null"
    if type(value) is bool:
        return f"bool {str(value).lower()}"
    kind = _KINDS.get(type(value), type(value).__name__)
    return f"{kind} {brief(value)}"


class NotAMapError(TypeError, UsageError):
    """Something given where a map or a map file's path goes; the message says what to write."""


def _as_path(options: object) -> str | os.PathLike[str]:
    """``options`` as the path of a map file, or :class:`NotAMapError`."""
    if isinstance(options, str | os.PathLike):
        return options
    fix = " (a dict: OptionsMap.from_dict(...))" if isinstance(options, Mapping) else ""
    raise NotAMapError(
        f"a map (OptionsMap) or a map file's path (str or Path) goes here; got "
        f"{type(options).__name__}{fix}"
    )


def as_map(options: OptionsMap | str | os.PathLike[str]) -> OptionsMap:
    """``options`` itself, or the map file it names, read with :func:`load_map`."""
    return options if isinstance(options, OptionsMap) else load_map(_as_path(options))


def as_map_file(options: OptionsMap | MapFile | str | os.PathLike[str]) -> MapFile:
    """``options`` (a map declares no effects), or the map file it names, read with
    :func:`read_map_file`."""
    if isinstance(options, MapFile):
        return options
    if isinstance(options, OptionsMap):
        return MapFile(options)
    return read_map_file(_as_path(options))


def _option_value(value: object, where: str, source: str) -> object:
    """``value`` (at ``where``) if it can be an option's: a bool, an int or a string."""
    if value is None:
        raise MapFileError(
            source,
            where,
            "the value is empty (null); write a value, or '' for an empty string",
        )
    if type(value) not in _TYPES.values():
        raise MapFileError(
            source,
            where,
            f"{_describe(value)} is not an option value; options are bool, int (32-bit) "
            "or string: write one of those, or quote the value to make it a string",
        )
    return value


def _value(data: Mapping[object, object], path: str, source: str) -> object:
    """The value of the option at ``path``, checked against its optional type."""
    value = _option_value(data["value"], f"{path}.value", source)
    declared = data.get("type")
    if declared is None:
        return value
    if type(declared) is not str or declared not in _TYPES:
        raise MapFileError(
            source,
            f"{path}.type",
            f"type {brief(declared)} is unknown; write bool, int or string (or leave type out)",
        )
    if type(value) is not _TYPES[declared]:
        article = "an" if declared == "int" else "a"
        fix = "quote it" if declared == "string" else f"write {article} {declared}"
        raise MapFileError(
            source,
            f"{path}.value",
            f"{_describe(value)} does not match 'type: {declared}': {fix}, or change the type",
        )
    return value


def _option(data: object, path: str, source: str, declared: Declared, backend: str) -> Option:
    if not isinstance(data, Mapping):
        raise MapFileError(
            source, path, f"an option is a mapping {{key: ..., value: ...}}; got {_describe(data)}"
        )
    unknown = [field for field in data if field not in _OPTION_FIELDS]
    if unknown and "key" not in data and len(data) == 1:
        key, value = (brief_plain(part) for part in next(iter(data.items())))
        raise MapFileError(
            source, path, f"write {{key: {key}, value: {value}}} instead of {{{key}: {value}}}"
        )
    if unknown:
        raise MapFileError(
            source,
            path,
            f"unknown field {brief(unknown[0])}; an option has key, value and optional "
            "type, effect, tolerance and when",
        )
    for field in ("key", "value"):
        if field not in data:
            raise MapFileError(source, path, f"missing {field}; write {{key: ..., value: ...}}")
    key = data["key"]
    if type(key) is not str:
        raise MapFileError(
            source, f"{path}.key", f"the key must be a string; got {_describe(key)}: quote it"
        )
    option = Option(key, _value(data, path, source))  # type: ignore[arg-type]
    if any(name in data for name in EFFECT_FIELDS):
        try:
            effect = parse_effect(data)
        except EffectFieldError as exc:
            raise MapFileError(source, f"{path}.{exc.field}", exc.problem) from None
        declared[(backend, key)] = DeclaredEffect(effect, f"{source}: {path}")
    return option


def _backend(
    backend_id: object, options: object, source: str, declared: Declared
) -> BackendOptions:
    path = backend_path(backend_id)
    if type(backend_id) is not str:
        raise MapFileError(
            source, path, f"the backend id must be a string; got {_describe(backend_id)}: quote it"
        )
    if options is None:
        raise MapFileError(
            source, path, "no options (null); write [] for a backend without options"
        )
    if isinstance(options, Mapping):
        return BackendOptions(backend_id, _mapping_form(options, path, source))
    if not isinstance(options, list):
        raise MapFileError(
            source,
            path,
            f"options are a mapping of key to value ({{workspace_sharing_mode: 1}}) or a list "
            f"of '- {{key: ..., value: ...}}' lines; got {_describe(options)}",
        )
    parsed = (
        _option(o, f"{path}[{i}]", source, declared, backend_id) for i, o in enumerate(options)
    )
    return BackendOptions(backend_id, tuple(parsed))


def _mapping_form(options: Mapping[object, object], path: str, source: str) -> tuple[Option, ...]:
    """``{key: value, ...}``: one option per key, in the file's order, types as written."""
    if "key" in options and "value" in options and set(options) <= set(_OPTION_FIELDS):
        raise MapFileError(
            source,
            path,
            "this reads as one option of the list form: write it as a list item, "
            "'- {key: ..., value: ...}', or as '{KEY: VALUE}' in the mapping form",
        )
    parsed = []
    for key, value in options.items():
        where = f"{path}.{brief_plain(key)}"
        if type(key) is not str:
            raise MapFileError(
                source, where, f"the key must be a string; got {_describe(key)}: quote it"
            )
        parsed.append(Option(key, _option_value(value, where, source)))  # type: ignore[arg-type]
    return tuple(parsed)


def _options_like(value: object) -> bool:
    """True for what reads as one backend's options: a list, or a mapping of plain values."""
    if isinstance(value, Mapping):
        return not any(isinstance(v, Mapping | list) for v in value.values())
    return isinstance(value, list)


def parse_map(data: object, source: str) -> OptionsMap:
    """Validate a loaded map document (``{"backends": {...}}``); ``source`` names it in errors."""
    return _parse(data, source, {})


def _parse(data: object, source: str, declared: Declared) -> OptionsMap:
    """:func:`parse_map`, each option's declared effect put in ``declared``."""
    if data is None:
        raise MapFileError(source, None, "the file is empty; a map file starts with 'backends:'")
    if not isinstance(data, Mapping):
        raise MapFileError(
            source,
            None,
            f"a map file is a mapping with the field 'backends'; got {_describe(data)}",
        )
    unknown = [field for field in data if field != "backends"]
    if unknown:
        hint = (
            f": a backend's options go under it (backends: {{{brief_plain(unknown[0])}: ...}})"
            if "backends" not in data and _options_like(data[unknown[0]])
            else ""
        )
        raise MapFileError(
            source,
            None,
            f"unknown field {brief(unknown[0])}; the only top-level field is 'backends'{hint}",
        )
    if "backends" not in data:
        raise MapFileError(
            source, None, "missing 'backends'; write 'backends: {}' for an empty map"
        )
    backends = data["backends"]
    if not isinstance(backends, Mapping):
        raise MapFileError(
            source,
            "backends",
            f"a mapping of backend id to options; got {_describe(backends)} "
            "(write 'backends: {}' for an empty map)",
        )
    parsed = tuple(_backend(b, options, source, declared) for b, options in backends.items())
    try:
        return OptionsMap(parsed)
    except MapValidationError as exc:
        problem = str(exc).removeprefix(f"{exc.path}: ")
        raise MapFileError(source, _path_as_written(exc.path, backends), problem) from None


def _path_as_written(path: str, backends: Mapping[object, object]) -> str:
    """``path`` (``backends.X[2].value``) as the file writes it: an option of a backend in
    the mapping form is named by its key (``backends.X.num_threads``)."""
    for backend_id, options in backends.items():
        if not isinstance(options, Mapping):
            continue
        for index, key in enumerate(options):
            entry = f"{backend_path(backend_id)}[{index}]"
            if path == entry or path.startswith(f"{entry}."):
                return f"{backend_path(backend_id)}.{brief_plain(key)}"
    return path
