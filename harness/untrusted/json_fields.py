"""Fields of JSON objects other runs and hosts wrote, each checked for the type it is kept as.

Results directories travel between hosts (a nightly job's artifacts, a lab's shared
folder), so ``run.json`` and ``results.jsonl`` are read as untrusted: a field of the
wrong type is a :class:`JsonFieldError` naming it, never an ``AttributeError`` later;
numbers are finite (``json`` reads ``NaN``) and integers fit a database's 64-bit column.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from harness.errors import UsageError
from harness.untrusted.reading import brief

_INT64: Final = 1 << 63
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
# A JSON list; records built in this process (a worker's report payload) hold tuples.
_SEQUENCE: Final = (list, tuple)


class _Required:
    """The default of a field that must be there."""


REQUIRED: Final = _Required()


class JsonFieldError(ValueError, UsageError):
    """A JSON value that is not what the file format says; the message names the field."""


def load_object(text: str, what: str) -> Mapping[str, Any]:
    """The JSON object ``text`` holds; ``what`` names it (``"the line"``) when it is none.
    Nesting too deep for ``json``, or a string no text can hold (a lone surrogate, which
    ``json`` reads from an escape like ``\\ud800``), is a :class:`JsonFieldError` too."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonFieldError("nested too deep to read") from None
    if _SURROGATE_ESCAPE.search(text):  # rare: only then is the value encoded again
        try:
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise JsonFieldError(
                "holds a lone surrogate (an escape \\ud800..\\udfff without its pair), which "
                "no stored text can hold"
            ) from None
    return json_object(value, what)


def json_object(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise JsonFieldError(f"{what} is not a JSON object; got {brief(value)}")
    return value


def _get(data: Mapping[str, Any], key: str, default: object) -> object:
    if key in data:
        return data[key]
    if isinstance(default, _Required):
        raise JsonFieldError(f"{key!r} is missing")
    return default


def _wrong(key: str, expected: str, value: object) -> JsonFieldError:
    return JsonFieldError(f"{key!r} must be {expected}; got {brief(value)}")


def text(data: Mapping[str, Any], key: str, default: str | _Required = REQUIRED) -> str:
    value = _get(data, key, default)
    if not isinstance(value, str):
        raise _wrong(key, "a string", value)
    return value


def optional_text(data: Mapping[str, Any], key: str) -> str | None:
    value = _get(data, key, None)
    return None if value is None else text(data, key)


def flag(data: Mapping[str, Any], key: str) -> bool:
    value = _get(data, key, REQUIRED)
    if not isinstance(value, bool):
        raise _wrong(key, "true or false", value)
    return value


def optional_flag(data: Mapping[str, Any], key: str) -> bool | None:
    return None if data.get(key) is None else flag(data, key)


def number(data: Mapping[str, Any], key: str, default: float | _Required = REQUIRED) -> float:
    value = _get(data, key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong(key, "a number", value)
    if abs(value) >= _INT64 or not math.isfinite(value):  # a huge int first: isfinite raises
        raise _wrong(key, "a finite number below 2**63", value)
    return float(value)


def optional_number(data: Mapping[str, Any], key: str) -> float | None:
    return None if data.get(key) is None else number(data, key)


def optional_integer(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -_INT64 <= value < _INT64:
        raise _wrong(key, "an integer that fits 64 bits", value)
    return value


def texts(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A list of strings (absent: empty)."""
    value = _get(data, key, [])
    if not isinstance(value, _SEQUENCE) or not all(isinstance(item, str) for item in value):
        raise _wrong(key, "a list of strings", value)
    return tuple(value)


def text_map(data: Mapping[str, Any], key: str) -> dict[str, str]:
    """An object of strings (absent: empty)."""
    value = _get(data, key, {})
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise _wrong(key, "an object of strings", value)
    return dict(value)


def objects(data: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...]:
    """A list of JSON objects (absent: empty)."""
    value = _get(data, key, [])
    if not isinstance(value, _SEQUENCE):
        raise _wrong(key, "a list of objects", value)
    return tuple(json_object(item, f"an item of {key!r}") for item in value)


def pairs(data: Mapping[str, Any], key: str, second: type[str] | type[bool]) -> tuple[Any, ...]:
    """A list of ``[string, second]`` pairs (absent: empty)."""
    value = _get(data, key, [])
    if not isinstance(value, _SEQUENCE) or not all(
        isinstance(item, _SEQUENCE)
        and len(item) == 2
        and isinstance(item[0], str)
        and type(item[1]) is second
        for item in value
    ):
        raise _wrong(key, f"a list of [string, {second.__name__}] pairs", value)
    return tuple((first, other) for first, other in value)
