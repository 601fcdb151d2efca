"""The optional parts of the harness and the extra that installs each.

The core (the plugin, the CLI, every device kind, the check, the SQLite history) needs
only the packages in ``[project] dependencies``. A labgrid lab and the history's
PostgreSQL driver and trend charts need an extra (``pip install
'executorch-hil-harness[lab]'``); a feature whose extra is missing says so in one line
(:class:`MissingExtra`). ``tests/test_extras.py`` imports every core module with the
extras' packages blocked, so that no core module comes to need one.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from harness.errors import UsageError

DISTRIBUTION = "executorch-hil-harness"


class MissingExtra(UsageError):
    """A feature was asked for whose optional dependencies are not installed here."""


@dataclass(frozen=True)
class Extra:
    """An optional dependency group of the package: its name and the modules it provides."""

    name: str
    modules: tuple[str, ...]

    @property
    def install(self) -> str:
        """The command that installs it, as a user types it."""
        return f"pip install '{DISTRIBUTION}[{self.name}]'"

    def missing(self) -> tuple[str, ...]:
        """Those of its modules that cannot be imported here."""
        return tuple(m for m in self.modules if importlib.util.find_spec(m) is None)

    def require(self, feature: str) -> None:
        """:class:`MissingExtra` naming ``feature`` and the install command, unless every
        module of the extra can be imported."""
        absent = self.missing()
        if absent:
            raise MissingExtra(
                f"{feature} needs the [{self.name}] extra ({', '.join(absent)} not installed "
                f"here): {self.install}"
            )


LAB = Extra("lab", ("labgrid", "grpc"))
POSTGRES = Extra("history", ("psycopg",))
CHARTS = Extra("history", ("matplotlib",))
ALL = (LAB, POSTGRES, CHARTS)
