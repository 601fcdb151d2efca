"""The one error of the command line: a command cannot do what it was asked."""

from __future__ import annotations

from harness.errors import UsageError


class CliError(UsageError):
    """A command cannot do what it was asked; the message says what to change."""
