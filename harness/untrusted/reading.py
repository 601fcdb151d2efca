"""Reading files other people wrote (device profiles, map files) without trusting them.

Profiles come from shared lab repositories and map files from anyone, so reading one
must never block, exhaust memory or flood the terminal:

- :func:`read_bounded_text` reads only regular files (never a FIFO, a device such as
  ``/dev/zero`` behind a symlink, or a directory), at most :data:`MAX_INPUT_BYTES`,
  checked before reading, as UTF-8;
- :func:`brief` quotes a bad value in an error message by its first few characters,
  without building the text of a large value first;
- :func:`printable` shows text from elsewhere on a terminal without its escapes.

Every refusal is an :class:`InputFileError` naming the file, the limit and the fix.
"""

from __future__ import annotations

import os
import reprlib
import stat

from harness.errors import UsageError

MAX_INPUT_BYTES = 1 << 20  # 1 MiB: hundreds of times the largest valid profile or map
BRIEF_CHARS = 40  # how much of a bad value an error message quotes

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputFileError(ValueError, UsageError):
    """An input file that cannot be read as it is.

    ``source`` names the file, ``location`` the line, byte or entry path (or None),
    ``problem`` what is wrong and how to fix it.
    """

    def __init__(self, source: str, location: str | None, problem: str) -> None:
        self.source = source
        self.location = location
        self.problem = problem
        name = printable(source)  # a file's name is anyone's: no escape sequence reaches a terminal
        where = f"{name}: {location}" if location else name
        super().__init__(f"{where}: {problem}")


def read_bounded_text(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of the regular file ``path`` (a leading BOM dropped), read as
    :func:`read_bounded_bytes` reads it."""
    return _decode(read_bounded_bytes(path, limit), os.fspath(path))


def read_bounded_bytes(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file ``path``.

    The file is opened without blocking and checked on the opened descriptor, so a
    FIFO or a device is refused before a byte is read, whatever its name or link
    says; at most ``limit + 1`` bytes are ever read.
    """
    source = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputFileError(source, None, f"cannot read the file: {exc.strerror}") from None
    try:
        mode = os.fstat(fd)
        if not stat.S_ISREG(mode.st_mode):
            kind = next((name for test, name in _KINDS if test(mode.st_mode)), "not a file")
            raise InputFileError(
                source, None, f"{kind}, not a regular file; give the path of a regular file"
            )
        if mode.st_size > limit:
            raise _too_large(source, f"{mode.st_size} bytes", limit)
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise InputFileError(source, None, f"cannot read the file: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after fstat
        raise _too_large(source, "more than that", limit)
    return data


def _too_large(source: str, size: str, limit: int) -> InputFileError:
    return InputFileError(
        source,
        None,
        f"{size}, limit {limit} bytes ({limit / (1 << 20):g} MiB); check the path, or "
        "split the file",
    )


def _read_at_most(fd: int, count: int) -> bytes:
    chunks = []
    while count > 0:
        chunk = os.read(fd, min(count, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _decode(data: bytes, source: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputFileError(source, None, "UTF-16 (it starts with a UTF-16 BOM); save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            source, f"byte {exc.start}", "not UTF-8; save the file as UTF-8"
        ) from None


class _Prefix(reprlib.Repr):
    """``reprlib`` with strings cut to a prefix (not elided in the middle) and big ints
    named by size: ``repr`` of a 5000-digit int raises in Python 3.11+."""

    def repr_str(self, x: str, level: int) -> str:
        return repr(x[: self.maxstring])

    def repr_int(self, x: int, level: int) -> str:
        return repr(x) if x.bit_length() <= 128 else f"<int of {x.bit_length()} bits>"


_PREFIX = _Prefix()
_PREFIX.maxstring = _PREFIX.maxother = BRIEF_CHARS + 1
_PREFIX.maxlevel = 3
_PREFIX.maxlist = _PREFIX.maxtuple = _PREFIX.maxdict = _PREFIX.maxset = 6


def brief(value: object) -> str:
    """``repr(value)``, cut to :data:`BRIEF_CHARS` characters and ``...`` when longer.

    The work is bounded too: a string is cut before quoting, containers are shown to a
    few items and levels, so a value built from a 1 MiB file (or a list that shares one
    element a million times) is quoted as cheaply as a short one.
    """
    text = _PREFIX.repr(value)
    return text if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS] + "..."


def brief_plain(value: object) -> str:
    """A short printable string as it is (``mode``), unquoted; anything else (a control
    character could rewrite the terminal) as :func:`brief`."""
    if isinstance(value, str) and len(value) <= BRIEF_CHARS and value.isprintable():
        return value
    return brief(value)


def printable(text: str) -> str:
    """Text from elsewhere as it may reach a terminal or a log line: anything not
    printable (escape sequences, line breaks) shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in text)
