"""Contract files: the option contract of a backend of one's own, beside the project's
profiles (``<device folder>/backends/<name>.yaml``; docs/map-files.md, "Your own
backend's contract").

```yaml
backend: NpuBackend
options:
  perf_mode: {type: int, low: 0, high: 3}
  cache_dir: {type: string, routes: [set]}
  fast_math: {type: bool, effect: numerics, tolerance: 0.001}   # what it may change
  dump_path: {type: string, effect: file, when: {dump: true}}   # (default: nothing)
load:                  # what init does with an option it cannot use (false: it reads none)
  unknown_key: init ignores it
set: false             # set_option reads no options
```

A file is untrusted input: read within :data:`MAX_FILE_BYTES` with the strict YAML reader,
at most :data:`MAX_FILES` a folder, every refusal one :class:`ContractFileError` line
naming the file, the field and the fix. :func:`declare_contract_files` declares each
(:func:`~harness.check.option_contracts.declare_contract`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.check.option_contracts import (
    BackendContract,
    ContractError,
    OptionRule,
    Route,
    RouteBehaviour,
    declare_contract,
)
from harness.codec.strict_yaml import YamlError, read_yaml
from harness.data.effects import FIELDS as EFFECT_FIELDS
from harness.data.effects import EffectFieldError, parse_effect
from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_OPTIONS_PER_BACKEND,
)
from harness.untrusted.reading import InputFileError, brief, brief_plain, read_bounded_text
from harness.untrusted.value_rules import real_path

FOLDER = "backends"  # inside each of the project's device folders
MAX_FILES = 64  # contract files a folder may hold
MAX_FILE_BYTES = 64 * 1024  # a contract of 64 options takes a few kB
MAX_TEXT_CHARS = 200  # a behaviour's words
_TOP = ("backend", "options", "load", "set")
_RULE = ("type", "low", "high", "routes", *EFFECT_FIELDS)
_TYPES: dict[str, type[bool] | type[int] | type[str]] = {"bool": bool, "int": int, "string": str}
_ROUTES = {"load": Route.LOAD, "set": Route.SET}
_BEHAVIOUR = ("unknown_key", "wrong_type", "out_of_range")
_NO_EFFECT = "it will have no effect"


class ContractFileError(YamlError):
    """A contract file that cannot be read or is not a valid contract: ``source`` the file,
    ``location`` the field (or line), ``problem`` what is wrong and the fix."""


def declare_contract_files(folders: Iterable[Path]) -> tuple[BackendContract, ...]:
    """Read and declare every ``backends/*.yaml`` of ``folders`` (a project's device
    folders), in name order; the contracts declared."""
    declared = []
    for folder in folders:
        files = sorted((folder / FOLDER).glob("*.yaml"))
        if len(files) > MAX_FILES:
            raise ContractFileError(
                str(folder / FOLDER),
                None,
                f"{len(files)} contract files, limit {MAX_FILES}: keep one file per backend",
            )
        for path in files:
            _refuse_link_outside(path, folder)
            contract = read_contract_file(path)
            try:
                declare_contract(contract)
            except ContractError as exc:
                raise ContractFileError(str(path), "backend", str(exc)) from None
            declared.append(contract)
    return tuple(declared)


def _refuse_link_outside(path: Path, folder: Path) -> None:
    """A contract file found in a project is the project's own: one that links outside its
    device folder (to a key or a token of the user's, in a repository someone shared)
    would have its text quoted in the refusal, in a log anyone may read."""
    if path.is_symlink() and not real_path(path).is_relative_to(real_path(folder)):
        raise ContractFileError(
            str(path),
            None,
            "a symlink to a file outside its device folder: put the contract file itself "
            f"in {FOLDER}/",
        )


def read_contract_file(path: Path) -> BackendContract:
    """The contract a file declares, checked field by field."""
    source = str(path)
    try:
        data = read_yaml(read_bounded_text(path, MAX_FILE_BYTES), source)
    except InputFileError as exc:
        raise ContractFileError(exc.source, exc.location, exc.problem) from None
    fields = _fields(data, source, None, _TOP, "a contract file")
    backend = fields.get("backend")
    if type(backend) is not str or not 1 <= len(backend.encode()) <= MAX_ID_BYTES:
        raise ContractFileError(
            source, "backend", f"the backend id, 1..{MAX_ID_BYTES} bytes; got {brief(backend)}"
        )
    options = fields.get("options", {})
    if not isinstance(options, Mapping) or len(options) > MAX_OPTIONS_PER_BACKEND:
        raise ContractFileError(
            source,
            "options",
            f"a mapping of at most {MAX_OPTIONS_PER_BACKEND} keys to their rule "
            "({type: int, low: 0, high: 3}); got " + brief(options),
        )
    rules = tuple(_rule(key, rule, source) for key, rule in options.items())
    return BackendContract(
        backend,
        rules,
        load=_behaviour(fields, "load", source),
        set=_behaviour(fields, "set", source),
        pinned_by=source,
    )


def _fields(
    data: object, source: str, where: str | None, allowed: tuple[str, ...], what: str
) -> Mapping[object, object]:
    """``data`` as a mapping whose fields are all in ``allowed``."""
    if not isinstance(data, Mapping):
        raise ContractFileError(
            source, where, f"{what} is a mapping of {', '.join(allowed)}; got {brief(data)}"
        )
    unknown = [name for name in data if name not in allowed]
    if unknown:
        raise ContractFileError(
            source, where, f"unknown field {brief(unknown[0])}; allowed: {', '.join(allowed)}"
        )
    return data


def _rule(key: object, data: object, source: str) -> OptionRule:
    where = f"options.{brief_plain(key)}"
    if type(key) is not str or not 1 <= len(key.encode()) <= MAX_KEY_BYTES:
        raise ContractFileError(source, where, f"a key is a string of 1..{MAX_KEY_BYTES} bytes")
    fields = _fields(data, source, where, _RULE, "an option's rule")
    kind = fields.get("type")
    if kind not in _TYPES:
        raise ContractFileError(source, f"{where}.type", f"bool, int or string; got {brief(kind)}")
    low, high = fields.get("low"), fields.get("high")
    for name, bound in (("low", low), ("high", high)):
        if bound is not None and (kind != "int" or type(bound) is not int):
            raise ContractFileError(
                source, f"{where}.{name}", f"an int bound of an int option; got {brief(bound)}"
            )
        if bound is not None and not INT32_MIN <= bound <= INT32_MAX:
            raise ContractFileError(
                source,
                f"{where}.{name}",
                f"within int32 ({INT32_MIN}..{INT32_MAX}), the runtime's int; got {brief(bound)}",
            )
    if type(low) is int and type(high) is int and low > high:
        raise ContractFileError(source, where, f"low {low} is above high {high}: swap them")
    routes = fields.get("routes", list(_ROUTES))
    if not isinstance(routes, list) or not routes or any(r not in _ROUTES for r in routes):
        raise ContractFileError(
            source, f"{where}.routes", f"a list of load and/or set; got {brief(routes)}"
        )
    chosen = frozenset(_ROUTES[str(r)] for r in routes)
    try:
        effect = parse_effect(fields)
    except EffectFieldError as exc:
        raise ContractFileError(source, f"{where}.{exc.field}", exc.problem) from None
    return OptionRule(key, _TYPES[str(kind)], low, high, chosen, effect)  # type: ignore[arg-type]


def _behaviour(fields: Mapping[object, object], route: str, source: str) -> RouteBehaviour | None:
    """What the backend does on ``route`` with an option it cannot use; None for ``false``
    (it reads no options there); left out, it reads them, and the words say no more."""
    data = fields.get(route, {})
    if data is False:
        return None
    texts = _fields(data, source, route, _BEHAVIOUR, f"{route} (or false)")
    for name, text in texts.items():
        if type(text) is not str or not text.isprintable() or len(text) > MAX_TEXT_CHARS:
            raise ContractFileError(
                source,
                f"{route}.{name}",
                f"a line of at most {MAX_TEXT_CHARS} characters; got {brief(text)}",
            )
    words = {name: str(texts.get(name, _NO_EFFECT)) for name in _BEHAVIOUR}
    return RouteBehaviour(**words)
