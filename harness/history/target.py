"""Where the history store is, as the user names it; checked without the database library
(the pytest plugin checks ``--history`` before any test, and loads SQLAlchemy only once a
run writes its first result)."""

from __future__ import annotations

import os

from harness.errors import UsageError
from harness.lifecycle.cache import cache_root

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
    """Where the history is: the option, else ``$ET_HARNESS_HISTORY``, else the cache's
    SQLite file; ``off`` turns it off."""
    return option or os.environ.get(STORE_ENV) or str(cache_root() / DEFAULT_FILE)


def driver_of(target: str) -> str:
    """The SQLAlchemy driver of ``target``: ``sqlite`` for a path or an ``sqlite://`` URL,
    ``postgresql+psycopg`` for a ``postgresql://`` URL."""
    if "://" not in target:
        return "sqlite"
    scheme = target.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        raise TargetError(
            f"{scheme}:// is not supported; give an SQLite file path or a "
            "postgresql://USER@HOST/DB URL"
        )
    return SCHEMES[scheme]
