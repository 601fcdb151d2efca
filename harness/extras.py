"""The optional parts of the harness and the extra that installs each.

The core (the plugin, the CLI, every device kind, the check, the SQLite history) needs
only the packages in ``[project] dependencies``. A labgrid lab and the history's
PostgreSQL driver and trend charts need an extra (``pip install
'executorch-hil-harness[lab]'``); a feature whose extra is missing says so in one line
(:meth:`Extra.missing`). ``tests/system/test_installed_wheel.py`` imports every module of the
harness where only the core is installed, so that no core module comes to need an extra.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

DISTRIBUTION = "executorch-hil-harness"


@dataclass(frozen=True)
class Extra:
    """An optional dependency group of the package: its name and the modules it provides."""

    name: str
    modules: tuple[str, ...]

    @property
    def install(self) -> str:
        """The command that installs it, as a user types it."""
        return f"pip install '{DISTRIBUTION}[{self.name}]'"

    def missing(self, feature: str) -> str | None:
        """The one line that says ``feature`` needs this extra, when one of its modules
        cannot be imported here; None when all can."""
        absent = [m for m in self.modules if importlib.util.find_spec(m) is None]
        if not absent:
            return None
        return (
            f"{feature} needs the [{self.name}] extra ({', '.join(absent)} not installed "
            f"here): {self.install}"
        )


LAB = Extra("lab", ("labgrid", "grpc"))
POSTGRES = Extra("history", ("psycopg",))
CHARTS = Extra("history", ("matplotlib",))
