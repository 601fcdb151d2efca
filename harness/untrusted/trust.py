"""What the user trusts as code: files the harness may let run things on this machine.

Profiles and the files they name are untrusted input (docs/security.md), but some
fields exist to run things: a wrapper and environment for the agent, a prebuilt agent
directory. On a device that is this machine (the ``local`` transport, or any
``emulator:``, whose device side runs here) those fields run code here, so they are
honoured only in files the user vouches for: the harness's own ``devices/`` directory,
and files or directories the user lists in an environment variable
(``$ET_HARNESS_TRUSTED_PROFILES``). The same mechanism serves any other "the user's
word" list (e.g. trusted SDK prefixes): one rule, "listed or inside a listed directory".
"""

from __future__ import annotations

import os
from pathlib import Path

from harness import shipped
from harness.untrusted.value_rules import ValueRuleError, expand_home, real_path

TRUSTED_PROFILES_ENV = "ET_HARNESS_TRUSTED_PROFILES"


def listed_by_user(path: Path, env_var: str) -> bool:
    """Whether ``path`` (resolved) is, or is inside, an entry of ``$env_var``.

    Entries are separated by ``os.pathsep``; ``~`` is expanded; empty entries ignored.
    """
    resolved = real_path(path)
    for entry in os.environ.get(env_var, "").split(os.pathsep):
        if entry:
            try:
                listed = real_path(expand_home(entry))
            except ValueRuleError:  # ~user of no user: trusts nothing
                continue
            if resolved == listed or resolved.is_relative_to(listed):
                return True
    return False


def profile_is_trusted(path: Path | None) -> bool:
    """A profile from the harness's ``devices/`` or one the user listed is trusted.

    A profile without a file (handed over by a lab coordinator) never is.
    """
    if path is None:
        return False
    built_in = shipped.devices_dir().resolve()
    return real_path(path).is_relative_to(built_in) or listed_by_user(path, TRUSTED_PROFILES_ENV)
