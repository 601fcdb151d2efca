"""How the check's text shows names, values and counts.

Names come from map files and devices: :func:`show_name` escapes any that would not
read unambiguously on a terminal. :func:`format_value` always shows a value's type.
"""

from __future__ import annotations

from collections.abc import Iterable


def format_value(value: object) -> str:
    """``bool true``, ``int 4``, ``string 'perf'``: the type is always shown."""
    if type(value) is bool:
        return f"bool {'true' if value else 'false'}"
    if type(value) is int:
        return f"int {value}"
    if type(value) is str:
        return f"string {value!r}"
    return f"{type(value).__name__} {value!r}"


def show_name(name: str) -> str:
    """A key or backend id as is when it reads unambiguously, else its repr.

    Names come from map files and devices: control characters (terminal escapes),
    bidi overrides and line separators are shown escaped, never sent to the terminal.
    """
    return name if name and name.isprintable() and name.strip() == name else repr(name)


def key_list(keys: Iterable[str]) -> str:
    """Keys or backend ids, each as :func:`show_name` shows it, comma-separated."""
    return ", ".join(show_name(k) for k in keys)


def count(n: int, noun: str) -> str:
    """``1 option``, ``2 options``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def times(n: object) -> str:
    """``once``, ``2 times``."""
    return "once" if n == 1 else f"{n} times"
