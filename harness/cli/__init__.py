"""``et-harness``, the command line (:mod:`.main`: the commands), and what only it runs:
:mod:`.bench` (``et-harness bench``, what a case costs)."""

from harness.cli.main import main

__all__ = ["main"]
