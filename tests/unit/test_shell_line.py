"""Shell lines from argv: every word quoted; what no shell line can carry is refused.

That the quoted words reach a program byte for byte over real SSH and adb is shown
by the round trips in tests/system/test_ssh_transport.py and tests/system/test_adb_transport.py.
"""

from __future__ import annotations

import pytest

from harness.transport.shell_line import shell_line


def test_every_word_is_quoted() -> None:
    line = shell_line(["printf", "%s", "a b", "$(x)"], {"K": "v w'"})
    assert line == "export K='v w'\"'\"''; printf %s 'a b' '$(x)'"


def test_exec_program_replaces_the_shell() -> None:
    assert shell_line(["cat", "a b"], {"K": "v"}, exec_program=True) == "export K=v; exec cat 'a b'"


def test_commands_that_cannot_be_expressed_are_refused() -> None:
    with pytest.raises(ValueError, match="NUL"):
        shell_line(["echo", "a\0b"])
    with pytest.raises(ValueError, match="NUL"):
        shell_line(["true"], {"K": "a\0b"})
    with pytest.raises(ValueError, match="environment variable name"):
        shell_line(["true"], {"BAD-NAME": "x"})
    with pytest.raises(ValueError, match="environment variable"):
        shell_line(["true"], {"A B": "1"})
    with pytest.raises(ValueError, match="argv is empty"):
        shell_line([])
