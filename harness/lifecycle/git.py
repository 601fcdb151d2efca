"""git, run in a checkout: one argv command within a time limit, its failure in one line.

Every git command the harness runs (a runtime's source tree, an MCU firmware's tree,
bisect, the harness's own commit in a run's history) goes through :func:`git`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.errors import UsageError

__all__ = ["GIT_TIMEOUT_S", "GitFailed", "git", "git_text", "git_text_or_empty"]

GIT_TIMEOUT_S = 60.0


class GitFailed(UsageError):
    """git could not start, took longer than its time limit, or exited non-zero.

    ``said`` is why: the end of git's stderr, or the error that kept it from finishing.
    """

    def __init__(self, checkout: Path, args: tuple[str, ...], said: str) -> None:
        super().__init__(f"git {' '.join(args[:2])} in {checkout} failed: {said}")
        self.said = said


def git(checkout: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> bytes:
    """What ``git -C checkout ARGS`` writes to stdout; :class:`GitFailed` otherwise."""
    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), *args],
            capture_output=True, timeout=timeout, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitFailed(checkout, args, str(exc)) from None
    if done.returncode != 0:
        raise GitFailed(checkout, args, done.stderr.decode(errors="replace").strip()[-300:])
    return done.stdout


def git_text(checkout: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> str:
    """:func:`git`'s output as text, stripped."""
    return git(checkout, *args, timeout=timeout).decode(errors="replace").strip()


def git_text_or_empty(checkout: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> str:
    """:func:`git_text`, or "" when git fails (a question a checkout may not answer)."""
    try:
        return git_text(checkout, *args, timeout=timeout)
    except GitFailed:
        return ""
