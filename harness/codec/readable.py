"""The readable form of wire messages: JSON-ready dicts with the specification's keys.

Only the command line uses it (``et-harness map``, ``send``); :func:`from_readable`
holds a message to every wire limit, as the binary encoder does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from harness.codec.wire import check_request, encode_report
from harness.codec.wire.program_messages import ProgramData, ProgramEnd, ProgramUpload
from harness.data.messages import (
    UPLOAD_ACTIONS,
    Action,
    LoadPath,
    LoadSpec,
    Outcome,
    Report,
    ReportEntry,
    Request,
)
from harness.data.options import BackendOptions, Option, OptionsMap, OptionType
from harness.errors import UsageError


class ReadableFormError(ValueError, UsageError):
    """A dict that is not a message in the readable form; names the bad field."""


_TYPE_NAMES = {OptionType.BOOL: "bool", OptionType.INT: "int", OptionType.STRING: "string"}
_TYPES_BY_NAME = {name: kind for kind, name in _TYPE_NAMES.items()}
_PYTHON_TYPES = {OptionType.BOOL: bool, OptionType.INT: int, OptionType.STRING: str}
_ACTIONS_BY_NAME = {action.name.lower(): action for action in Action}
_OUTCOMES_BY_NAME = {outcome.name.lower(): outcome for outcome in Outcome}


def _readable_option(option: Option) -> dict[str, object]:
    return {"key": option.key, "type": _TYPE_NAMES[option.type], "value": option.value}


def to_readable(msg: Request | Report | ProgramUpload) -> dict[str, object]:
    """The readable form of a message: a JSON-ready dict with the spec's keys in order."""
    if isinstance(msg, ProgramData):
        return {
            "type": "request",
            "seq": msg.seq,
            "action": "program_data",
            "offset": msg.offset,
            "bytes": msg.data.hex(),
        }
    if isinstance(msg, ProgramEnd):
        return {
            "type": "request",
            "seq": msg.seq,
            "action": "program_end",
            "size": msg.size,
            "crc": msg.crc,
        }
    if isinstance(msg, Request):
        return _readable_request(msg)
    if isinstance(msg, Report):
        return _readable_report(msg)
    raise TypeError(f"not a Request or Report: {type(msg).__name__}")


def _readable_request(msg: Request) -> dict[str, object]:
    """A request's readable form (a LOAD's path, flags and further models too)."""
    readable: dict[str, object] = {
        "type": "request",
        "seq": msg.seq,
        "action": Action(msg.action).name.lower(),
        "program": msg.program,
        "delegates": list(msg.delegates),
        "backends": _readable_backends(msg.options),
    }
    if msg.action == Action.LOAD:
        readable |= {
            "path": LoadPath(msg.path).label,
            "keep": msg.keep,
            "method": msg.method,
            "method_backends": _readable_backends(msg.method_options),
            "concurrent": msg.concurrent,
            "models": [
                {
                    "program": m.program,
                    "delegates": list(m.delegates),
                    "backends": _readable_backends(m.options),
                    "path": LoadPath(m.path).label,
                    "method": m.method,
                    "method_backends": _readable_backends(m.method_options),
                }
                for m in msg.models
            ],
        }
    return readable


def _readable_report(msg: Report) -> dict[str, object]:
    return {
        "type": "report",
        "seq": msg.seq,
        "action": Action(msg.action).name.lower(),
        "outcome": Outcome(msg.outcome).name.lower(),
        "detail": int(msg.detail),
        "message": msg.message,
        "facts": [_readable_option(o) for o in msg.facts],
        "entries": [
            {
                "name": e.name,
                "status": int(e.status),
                "calls": e.calls,
                "executes": e.executes,
                "flags": e.flags,
                "model": e.model,
                "options": [_readable_option(o) for o in e.options],
            }
            for e in msg.entries
        ],
    }


def _readable_backends(options: OptionsMap) -> list[dict[str, object]]:
    return [
        {"id": b.backend_id, "options": [_readable_option(o) for o in b.options]}
        for b in options.backends
    ]


def _fields(data: object, path: str, names: tuple[str, ...]) -> list[object]:
    """The values of exactly the keys ``names`` of a readable-form object."""
    if not isinstance(data, Mapping):
        raise ReadableFormError(f"{path}: expected an object, got {type(data).__name__}")
    missing = [n for n in names if n not in data]
    unknown = [k for k in data if k not in names]
    if missing or unknown:
        raise ReadableFormError(
            f"{path}: missing {missing}, unknown {unknown}; the fields are {list(names)}"
        )
    return [data[n] for n in names]


def _wrong(value: object, expected: str, path: str) -> ReadableFormError:
    return ReadableFormError(f"{path}: expected {expected}, got {type(value).__name__} {value!r}")


def _str(value: object, path: str) -> str:
    if type(value) is not str:
        raise _wrong(value, "a string", path)
    return value


def _int(value: object, path: str) -> int:
    if type(value) is not int:
        raise _wrong(value, "an integer", path)
    return value


def _bool(value: object, path: str) -> bool:
    if type(value) is not bool:
        raise _wrong(value, "a bool", path)
    return value


def _list(value: object, path: str) -> list[object]:
    if type(value) is not list:
        raise _wrong(value, "a list", path)
    return value


def _option_from_readable(data: object, path: str) -> Option:
    key, type_name, value = _fields(data, path, ("key", "type", "value"))
    if type_name not in _TYPES_BY_NAME:
        raise ReadableFormError(
            f"{path}.type: {type_name!r} is not one of {sorted(_TYPES_BY_NAME)}"
        )
    expected = _PYTHON_TYPES[_TYPES_BY_NAME[type_name]]
    if type(value) is not expected:
        raise _wrong(value, f"a {type_name} as the type says", f"{path}.value")
    return Option(_str(key, f"{path}.key"), value)  # type: ignore[arg-type]


def _options_from_readable(data: object, path: str) -> tuple[Option, ...]:
    return tuple(_option_from_readable(o, f"{path}[{i}]") for i, o in enumerate(_list(data, path)))


def _action(value: object) -> Action:
    if not isinstance(value, str) or value not in _ACTIONS_BY_NAME:
        raise ReadableFormError(f"action: {value!r} is not one of {list(_ACTIONS_BY_NAME)}")
    return _ACTIONS_BY_NAME[value]


_REQUEST_FIELDS = ("type", "seq", "action", "program", "delegates", "backends")
_LOAD_FIELDS = ("path", "keep", "method", "method_backends", "concurrent", "models")
_MODEL_FIELDS = ("program", "delegates", "backends", "path", "method", "method_backends")


def _path_from_readable(value: object, path: str) -> LoadPath:
    try:
        return LoadPath.from_label(_str(value, path))
    except ValueError as exc:
        raise ReadableFormError(f"{path}: {exc}") from None


def _model_from_readable(data: object, path: str) -> LoadSpec:
    program, delegates, backends, load_path, method, method_backends = _fields(
        data, path, _MODEL_FIELDS
    )
    return LoadSpec(
        _str(program, f"{path}.program"),
        tuple(
            _str(d, f"{path}.delegates[{i}]")
            for i, d in enumerate(_list(delegates, f"{path}.delegates"))
        ),
        _backends_from_readable(backends, f"{path}.backends"),
        _path_from_readable(load_path, f"{path}.path"),
        _str(method, f"{path}.method"),
        _backends_from_readable(method_backends, f"{path}.method_backends"),
    )


def _backends_from_readable(data: object, path: str) -> OptionsMap:
    maps = []
    for i, backend in enumerate(_list(data, path)):
        backend_id, options = _fields(backend, f"{path}[{i}]", ("id", "options"))
        maps.append(
            BackendOptions(
                _str(backend_id, f"{path}[{i}].id"),
                _options_from_readable(options, f"{path}[{i}].options"),
            )
        )
    return OptionsMap.unchecked(maps)


def _upload_from_readable(data: Mapping[str, object], action: Action) -> ProgramUpload:
    if action is Action.PROGRAM_DATA:
        _, seq, _, offset, chunk = _fields(
            data, "request", ("type", "seq", "action", "offset", "bytes")
        )
        try:
            raw = bytes.fromhex(_str(chunk, "bytes"))
        except ValueError:
            raise ReadableFormError(f"bytes: {chunk!r} is not hex digits, two a byte") from None
        return ProgramData(_u32(offset, "offset"), raw, _int(seq, "seq"))
    _, seq, _, size, crc = _fields(data, "request", ("type", "seq", "action", "size", "crc"))
    return ProgramEnd(_u32(size, "size"), _u32(crc, "crc"), _int(seq, "seq"))


def _u32(value: object, path: str) -> int:
    number = _int(value, path)
    if not 0 <= number <= 0xFFFFFFFF:
        raise ReadableFormError(f"{path}: {number} is not a u32 (0..4294967295)")
    return number


def _request_from_readable(data: Mapping[str, object]) -> Request | ProgramUpload:
    action_of = _action(data["action"]) if "action" in data else None
    if action_of in UPLOAD_ACTIONS:
        return _upload_from_readable(data, action_of)
    is_load = action_of is Action.LOAD
    values = _fields(data, "request", _REQUEST_FIELDS + (_LOAD_FIELDS if is_load else ()))
    _, seq, action, program, delegates, backends = values[:6]
    req = Request(
        _action(action),
        _backends_from_readable(backends, "backends"),
        _str(program, "program"),
        tuple(_str(d, f"delegates[{i}]") for i, d in enumerate(_list(delegates, "delegates"))),
        _int(seq, "seq"),
    )
    if is_load:
        path, keep, method, method_backends, concurrent, models = values[6:]
        load_path = _path_from_readable(path, "path")
        keep, concurrent = _bool(keep, "keep"), _bool(concurrent, "concurrent")
        req = dataclasses.replace(
            req,
            path=load_path,
            keep=keep,
            method=_str(method, "method"),
            method_options=_backends_from_readable(method_backends, "method_backends"),
            concurrent=concurrent,
            models=tuple(
                _model_from_readable(m, f"models[{i}]")
                for i, m in enumerate(_list(models, "models"))
            ),
        )
    check_request(req)
    return req


def _entry_from_readable(data: object, path: str) -> ReportEntry:
    name, status, calls, executes, flags, model, options = _fields(
        data, path, ("name", "status", "calls", "executes", "flags", "model", "options")
    )
    return ReportEntry(
        _str(name, f"{path}.name"),
        _int(status, f"{path}.status"),
        _int(calls, f"{path}.calls"),
        _int(executes, f"{path}.executes"),
        _int(flags, f"{path}.flags"),
        _options_from_readable(options, f"{path}.options"),
        _int(model, f"{path}.model"),
    )


def _report_from_readable(data: Mapping[str, object]) -> Report:
    _, seq, action, outcome, detail, message, facts, entries = _fields(
        data,
        "report",
        ("type", "seq", "action", "outcome", "detail", "message", "facts", "entries"),
    )
    if not isinstance(outcome, str) or outcome not in _OUTCOMES_BY_NAME:
        raise ReadableFormError(f"outcome: {outcome!r} is not one of {list(_OUTCOMES_BY_NAME)}")
    rep = Report(
        _action(action),
        _OUTCOMES_BY_NAME[outcome],
        _int(detail, "detail"),
        _str(message, "message"),
        _options_from_readable(facts, "facts"),
        tuple(
            _entry_from_readable(e, f"entries[{i}]")
            for i, e in enumerate(_list(entries, "entries"))
        ),
        _int(seq, "seq"),
    )
    encode_report(rep)
    return rep


def from_readable(data: Mapping[str, object]) -> Request | Report | ProgramUpload:
    """The message of a readable-form dict; the inverse of :func:`to_readable`.

    Raises :class:`ReadableFormError` for a malformed dict and :class:`WireError`
    for a message that breaks a wire limit. Requests carry ``OptionsMap.unchecked``
    maps, as decoded ones do (the wire rules were checked here).
    """
    kind = data.get("type") if isinstance(data, Mapping) else None
    if kind == "request":
        return _request_from_readable(data)
    if kind == "report":
        return _report_from_readable(data)
    raise ReadableFormError(f'type: expected "request" or "report", got {kind!r}')
