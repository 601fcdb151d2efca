"""Rules for untrusted values that reach command lines, ssh config tokens and file systems.

Profiles (and, later, a lab coordinator) are untrusted input (docs/security.md). Every
host name, user, port, argv word, device path and time bound they give is checked here,
once, before anything runs. Host names and users follow allowlists that are stricter
than OpenSSH 9.6's ``valid_hostname`` / ``valid_ruser`` (the CVE-2023-51385 fix): no
shell metacharacters, no whitespace or control bytes, no leading ``-``.

Each check returns the value it accepted or raises :class:`ValueRuleError`, whose
message says what is wrong and how to write it; callers put the file and field in front.
"""

from __future__ import annotations

import ipaddress
import math
import os
import posixpath
import re
from pathlib import Path

from harness.errors import UsageError
from harness.untrusted.reading import brief

MAX_SECONDS = 86400  # one day: a longer bound is a typo, and would keep a hung test alive
MAX_HOST_LENGTH = 253  # a DNS name's limit
MAX_USER_LENGTH = 64  # login and device names
MAX_WORD_LENGTH = 255
MAX_PATH_LENGTH = 1024
MAX_NAME_BYTES = 255  # one name of a path: Linux file systems' NAME_MAX
MAX_LINE_LENGTH = 300  # a description; the longest shipped is under 100

_NAME_CHAR = r"[A-Za-z0-9_.-]"
_WORD_CHAR = r"[A-Za-z0-9_.:@/+\[\]-]"
_PATH_CHAR = r"[A-Za-z0-9_.:@+/-]"  # ":" for /dev/serial/by-path/pci-0000:00:14.0-...
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HOST_PORT = re.compile(r"\[(?P<v6>[^\]]*)\]:(?P<p6>[^:]*)|(?P<host>[^:\[\]]*):(?P<port>[^:]*)")

# Directories whose whole tree belongs to the system: a work_dir is never inside one.
_SYSTEM_TREES = (
    "apex",
    "bin",
    "boot",
    "dev",
    "etc",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "proc",
    "product",
    "sbin",
    "sys",
    "system",
    "usr",
    "vendor",
)
# Shared top-level directories: a work_dir may lie below one, never be one.
_SHARED_ROOTS = ("data", "home", "mnt", "media", "opt", "root", "run", "srv", "tmp", "var")


class ValueRuleError(ValueError, UsageError):
    """A value breaks a rule; the message says the rule and how to write the value."""


def _refuse(value: str, char: str, allowed: str) -> None:
    """Raise naming the first character of ``value`` outside the ``char`` class."""
    for c in value:
        if ord(c) < 0x20 or ord(c) == 0x7F:
            raise ValueRuleError(f"{brief(value)} holds the control byte {c!r}; {allowed}")
        if c.isspace():
            raise ValueRuleError(f"{brief(value)} holds whitespace; {allowed}")
        if not re.fullmatch(char, c):
            raise ValueRuleError(f"{brief(value)} holds {c!r}, which is not allowed; {allowed}")
    raise ValueRuleError(f"{brief(value)} is not allowed; {allowed}")


def _short_string(value: object, limit: int, allowed: str) -> str:
    """``value`` if it is a non-empty string of at most ``limit`` characters."""
    if not isinstance(value, str) or not value:
        raise ValueRuleError(f"must be a non-empty string; got {brief(value)}; {allowed}")
    if len(value) > limit:
        raise ValueRuleError(f"{brief(value)} is longer than {limit} characters")
    return value


def check_host(value: object) -> str:
    """A host name, an IPv4/IPv6 address (no brackets, no zone) or an ssh config alias."""
    allowed = (
        "give a host name, an IP address or a Host alias of the ssh config: letters, "
        "digits, '.', '-' and '_' (IPv6: hex digits and ':'), not starting with '-'"
    )
    if not isinstance(value, str) or not value:
        raise ValueRuleError(f"must be a non-empty string; got {brief(value)}; {allowed}")
    if len(value) > MAX_HOST_LENGTH:
        raise ValueRuleError(f"{brief(value)} is longer than {MAX_HOST_LENGTH} characters")
    if value.startswith("-"):
        raise ValueRuleError(f"{brief(value)} starts with '-', which ssh and adb read as an option")
    if ":" in value:
        try:
            address = ipaddress.IPv6Address(value)
        except ValueError:
            raise ValueRuleError(f"{brief(value)} is not an IPv6 address; {allowed}") from None
        if address.scope_id is not None:
            raise ValueRuleError(f"{brief(value)}: zone ids ('%...') are not accepted; {allowed}")
        return value
    if not _NAME.fullmatch(value):
        _refuse(value, _NAME_CHAR, allowed)
    return value


def check_user(value: object) -> str:
    """A login name: letters, digits, ``.``, ``-``, ``_``; not starting with ``-``."""
    allowed = "give a login name: letters, digits, '.', '-' and '_', not starting with '-'"
    value = _short_string(value, MAX_USER_LENGTH, allowed)
    if value.startswith("-"):
        raise ValueRuleError(f"{brief(value)} starts with '-', which ssh reads as an option")
    if not _NAME.fullmatch(value):  # the same alphabet as host names
        _refuse(value, _NAME_CHAR, allowed)
    return value


def check_port(value: object) -> int:
    """A TCP port, 1..65535 (0 is refused, never taken to mean 22)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueRuleError(f"must be an integer TCP port, 1..65535; got {brief(value)}")
    if not 1 <= value <= 65535:
        raise ValueRuleError(f"must be a TCP port, 1..65535; got {brief(value)}")
    return value


def port_from_text(text: str) -> int:
    """A port written as text (ssh config ``Port``, ``host:port``)."""
    if not re.fullmatch(r"[0-9]{1,5}", text):
        raise ValueRuleError(f"port {brief(text)} is not a number 1..65535")
    return check_port(int(text))


def split_host_port(value: object) -> tuple[str, int]:
    """``host:port`` or ``[v6addr]:port``, each part checked."""
    if not isinstance(value, str):
        raise ValueRuleError(f"must be a string 'host:port'; got {brief(value)}")
    match = _HOST_PORT.fullmatch(value)
    if match is None:
        raise ValueRuleError(f"{brief(value)} is not host:port (IPv6: [addr]:port)")
    host = match["v6"] if match["v6"] is not None else match["host"]
    port = match["p6"] if match["p6"] is not None else match["port"]
    return check_host(host), port_from_text(port)


def check_word(value: object, what: str) -> str:
    """One argv word for a host-side tool (an adb serial, a labgrid place name)."""
    allowed = f"give {what}: letters, digits and . _ : @ / + - [ ], not starting with '-'"
    value = _short_string(value, MAX_WORD_LENGTH, allowed)
    if value.startswith("-"):
        raise ValueRuleError(f"{brief(value)} starts with '-', which a tool reads as an option")
    if not re.fullmatch(_WORD_CHAR + "+", value):
        _refuse(value, _WORD_CHAR, allowed)
    return value


def check_name(value: object) -> str:
    """A device name: it becomes part of file and directory names, so a plain word."""
    allowed = "give a name of letters, digits, '.', '-' and '_', not starting with '.' or '-'"
    value = _short_string(value, MAX_USER_LENGTH, allowed)
    if value[0] in ".-":
        raise ValueRuleError(f"{brief(value)} starts with {value[0]!r}; {allowed}")
    if not _NAME.fullmatch(value):
        _refuse(value, _NAME_CHAR, allowed)
    return value


def check_line(value: object) -> str:
    """Text a person reads in a listing (a description): one printable line, not too long
    to read; an escape sequence could rewrite the terminal."""
    allowed = f"write one line of printable text, at most {MAX_LINE_LENGTH} characters"
    if not isinstance(value, str):
        raise ValueRuleError(f"must be a string; got {brief(value)}; {allowed}")
    if len(value) > MAX_LINE_LENGTH:
        raise ValueRuleError(f"{brief(value)} is longer than {MAX_LINE_LENGTH} characters")
    # YAML's block scalars (description: >) end in a line break
    bad = next((c for c in value.rstrip("\n") if not c.isprintable()), None)
    if bad is not None:
        raise ValueRuleError(f"{brief(value)} holds {bad!r}; {allowed}")
    return value


def check_absolute_path(value: object, what: str) -> str:
    """An absolute, normalised path: no ``..``, ``.``, ``//`` or trailing ``/``."""
    allowed = f"give {what} as an absolute path of letters, digits and . _ - + @ : /"
    value = _short_string(value, MAX_PATH_LENGTH, allowed)
    if not value.startswith("/"):
        raise ValueRuleError(
            f"{brief(value)} is relative: it would depend on the current directory; {allowed}"
        )
    if not re.fullmatch(_PATH_CHAR + "+", value):
        _refuse(value, _PATH_CHAR, allowed)
    check_path_fits(value)
    normal = posixpath.normpath(value)
    if normal != value or "//" in value:
        better = "/" + normal.lstrip("/")
        raise ValueRuleError(f"{brief(value)} is not normalised: write {brief(better)}")
    return value


def check_work_dir(value: object) -> str:
    """A device directory the harness may fill: absolute, normalised, not a system one."""
    path = check_absolute_path(value, "the directory the harness may write to")
    parts = path.strip("/").split("/")
    fix = "give a directory of its own, e.g. /tmp/et-harness"
    if path == "/":
        raise ValueRuleError(f"'/' is the file system root; {fix}")
    if parts[0] in _SYSTEM_TREES:
        raise ValueRuleError(f"{brief(path)} is inside the system directory /{parts[0]}; {fix}")
    if len(parts) == 1 and parts[0] in _SHARED_ROOTS:
        raise ValueRuleError(f"{brief(path)} is a shared system directory; {fix}")
    return path


def check_seconds(value: object, limit: float = MAX_SECONDS) -> float:
    """A time bound: a number > 0 and at most ``limit`` seconds (a day by default)."""
    rule = f"must be seconds > 0, at most {limit:g} ({limit / 3600:g} h)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueRuleError(f"{rule}; got {brief(value)}")
    if (isinstance(value, float) and not math.isfinite(value)) or value <= 0:
        raise ValueRuleError(f"{rule}; got {brief(value)}")
    if value > limit:
        raise ValueRuleError(f"{rule}; got {brief(value)}: lower it")
    return float(value)


def check_count(value: object, low: int, high: int) -> int:
    """A whole number in ``low..high`` (a baud rate, a size)."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and low <= value <= high:
            return int(value)
        raise ValueRuleError(f"must be a whole number {low}..{high}; got {brief(value)}")
    if not low <= value <= high:
        raise ValueRuleError(f"{brief(value)} is outside {low}..{high}")
    return value


def check_path_fits(value: str) -> None:
    """Refuse a path no file system call takes: a character no file name's bytes can hold
    (a lone surrogate), more than :data:`MAX_PATH_LENGTH` bytes, or a name of more than
    :data:`MAX_NAME_BYTES`."""
    try:
        encoded = os.fsencode(value)
    except UnicodeEncodeError:
        raise ValueRuleError(
            f"{brief(value)} holds a character no file name can hold (a lone surrogate); "
            "write the path as plain text"
        ) from None
    if len(encoded) > MAX_PATH_LENGTH:
        raise ValueRuleError(
            f"{brief(value)} is {len(encoded)} bytes long, limit {MAX_PATH_LENGTH}: shorten it"
        )
    longest = max(encoded.split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        raise ValueRuleError(
            f"{brief(value)} holds a name of {len(longest)} bytes, longer than the "
            f"{MAX_NAME_BYTES} a file name can have: shorten it"
        )


def real_path(path: Path) -> Path:
    """``path`` absolute, with its symlinks followed as far as they go. A symlink loop is
    left as it is (``Path.resolve`` raises RuntimeError for it), so that using the path
    fails as a missing file's would."""
    return Path(os.path.realpath(path))


def expand_home(value: str, named_by: str = "") -> Path:
    """``value`` as a path, a leading ``~`` or ``~user`` expanded; a ``~user`` this machine
    does not know (``Path.expanduser`` raises RuntimeError for it) is refused, the message
    starting with ``named_by`` (an environment variable, say) when given."""
    try:
        return Path(value).expanduser()
    except RuntimeError:  # the name is not repeated: brief() escaped and shortened it
        whose = "the user named after ~" if value[1:2] not in ("", "/") else "this user"
        where = f"{named_by}: " if named_by else ""
        raise ValueRuleError(
            f"{where}{brief(value)}: {whose} has no home directory on this machine; "
            "write the path out in full"
        ) from None
