"""POSIX shell lines built from argv, for transports whose device runs a shell line.

SSH and ``adb shell`` hand the device one line of text, not an argv. The line is
built here, every word quoted with :func:`shlex.quote`, so arguments reach the
program byte for byte whatever they contain; nothing is pasted in unquoted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def shell_line(
    argv: Sequence[str], env: Mapping[str, str] | None = None, *, exec_program: bool = False
) -> str:
    """Shell text that runs ``argv`` with ``env`` exported, every word quoted.

    With ``exec_program`` the shell replaces itself with the program, which then
    has the shell's pid. NUL cannot be passed to a program and is refused.
    """
    if not argv:
        raise ValueError("argv is empty: give the program to run")
    env = dict(env or {})
    for word in [*argv, *env, *env.values()]:
        if "\0" in word:
            raise ValueError(f"NUL byte in {word!r}: it cannot be passed to a program")
    exports = []
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"environment variable name {name!r}: use letters, digits and _")
        exports.append(f"export {name}={shlex.quote(value)}; ")
    return "".join(exports) + ("exec " if exec_program else "") + shlex.join(argv)
