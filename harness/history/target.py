"""Where the history store is, as the user names it; checked without the database library
(the pytest plugin checks ``--history`` before any test, and loads SQLAlchemy only once a
run writes its first result)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import filelock

from harness.errors import UsageError
from harness.lifecycle.cache import cache_root, data_root
from harness.lifecycle.disk import writing
from harness.untrusted.value_rules import ValueRuleError, expand_home

STORE_ENV = "ET_HARNESS_HISTORY"
OFF = "off"
DEFAULT_FILE = "history.sqlite"
# URL schemes taken, and the SQLAlchemy driver each becomes.
SCHEMES = {
    "sqlite": "sqlite",
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}


class TargetError(ValueError, UsageError):
    """A ``--history`` value no store can be made of; the message says what to give."""


def store_target(option: str | None) -> str:
    """Where the history is: the option, else ``$ET_HARNESS_HISTORY``, else the SQLite
    file in the data folder (:func:`~harness.lifecycle.cache.data_root`, never the cache,
    which people delete); ``off`` turns it off."""
    return option or os.environ.get(STORE_ENV) or str(default_store())


def checked_target(option: str | None) -> str:
    """:func:`store_target`, checked (:func:`driver_of`) unless ``off``: a target no store
    can be made of is a :class:`TargetError` that names where it was given, ``--history``
    or ``ET_HARNESS_HISTORY`` (the default store is always a plain path)."""
    target = store_target(option)
    if target != OFF:
        try:
            driver_of(target)
        except TargetError as exc:
            raise TargetError(f"{'--history' if option else STORE_ENV}: {exc}") from None
    return target


def default_store() -> Path:
    """The data folder's SQLite file; a history an older harness kept in the cache is
    moved there first, once, with one line on stderr."""
    target = data_root() / DEFAULT_FILE
    old = cache_root() / DEFAULT_FILE
    if target.exists() or not old.exists():
        return target
    with writing(target.parent, "moving the run history out of the cache"):
        target.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(target.parent / f"{DEFAULT_FILE}.lock")):
            if old.exists() and not target.exists():
                for suffix in ("-wal", "-shm", "-journal"):  # SQLite's own, if left
                    if Path(f"{old}{suffix}").exists():
                        shutil.move(f"{old}{suffix}", f"{target}{suffix}")
                shutil.move(old, target)
                print(
                    f"history: moved {old} to {target} (the cache may be deleted; the "
                    "history is data)",
                    file=sys.stderr,
                    flush=True,
                )
    return target


def driver_of(target: str) -> str:
    """The SQLAlchemy driver of ``target``: ``sqlite`` for a path or an ``sqlite://`` URL,
    ``postgresql+psycopg`` for a ``postgresql://`` URL."""
    if "://" not in target:
        try:
            expand_home(target)
        except ValueRuleError as exc:
            raise TargetError(str(exc)) from None
        return "sqlite"
    scheme = target.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        raise TargetError(
            f"{scheme}:// is not supported; give an SQLite file path or a "
            "postgresql://USER@HOST/DB URL"
        )
    return SCHEMES[scheme]
