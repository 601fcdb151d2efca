"""The route to a board: jump hosts and the board, resolved through the ssh config,
whose values are checked like the profile's."""

from __future__ import annotations

import getpass
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import paramiko

from harness.transport.ssh.hop import Hop
from harness.transport.ssh.setting_errors import (
    SshConfigError,
)
from harness.transport.ssh.ssh_settings import (
    DEFAULT_KNOWN_HOSTS,
    DEFAULT_SSH_CONFIG,
    MAX_JUMPS,
    SshSettings,
    parse_jumps,
)
from harness.untrusted.reading import InputFileError, brief_plain, read_bounded_text
from harness.untrusted.value_rules import (
    check_host,
    check_user,
    expand_home,
    port_from_text,
)

_T = TypeVar("_T")


_PROXY_TOKEN = re.compile(r"%(.?)", re.DOTALL)  # what follows a % (nothing: at the end)
# What paramiko must not read in an ssh config, each hidden as a private-use character: %%
# (a literal %: it would expand the %h of %%h), and ~, which it replaces by this user's home
# anywhere in IdentityFile and ProxyCommand (~other/key became $HOME + "other/key"); here an
# IdentityFile is expanded as OpenSSH does, and ProxyCommand's shell expands its own.
_HIDDEN = {"%%": "\ue000", "~": "\ue001"}


@dataclass(frozen=True)
class _SshConfigText:
    """The text of an ssh config file, looked up one host at a time."""

    path: Path | None  # None: there is no config
    text: str
    commands: bool  # whether ProxyCommand and Match exec are honoured
    field: str  # the SshSettings field errors in it are reported under

    def lookup(self, host: str, port: int | None, user: str | None) -> paramiko.SSHConfigDict:
        """``host``'s options, with ``port`` and ``user`` taking precedence over the file's,
        as ``ssh -p PORT -l USER`` gives them: ProxyCommand's ``%p`` and ``%r`` expand to
        them. ``host``, ``user`` and ``port`` have passed :mod:`harness.untrusted.value_rules`, so
        they are plain words in this text."""
        override = [f"Host {host}"]
        if port is not None:
            override.append(f"    Port {port}")
        if user is not None:
            override.append(f"    User {user}")
        text = self.text  # with what paramiko must not read hidden from it, and put back
        for seen, hidden in _HIDDEN.items():
            text = text.replace(seen, hidden)
        whole = "\n".join(override) + "\nHost *\n" + text
        try:
            entry = paramiko.SSHConfig.from_text(whole).lookup(host)
        except (paramiko.ConfigParseError, ValueError) as exc:
            raise SshConfigError(f"ssh config {self.path}: {exc}", self.field) from None
        for key, value in entry.items():
            if isinstance(value, str):
                entry[key] = _shown(value)
            elif isinstance(value, list):
                entry[key] = [_shown(v) for v in value]
        return entry

    def where(self, host: str) -> str:
        return f"ssh config {self.path}, Host {host}"


def _shown(value: str) -> str:
    """``value`` with what :data:`_HIDDEN` hid from paramiko put back."""
    for seen, hidden in _HIDDEN.items():
        value = value.replace(hidden, seen)
    return value


def _read_ssh_config(path: Path | None, commands: bool) -> _SshConfigText:
    """The config ``path`` names (``~/.ssh/config`` if None and it exists), bounded in size;
    a missing, special or oversized file named by the profile is an error."""
    field = "ssh_config"
    if path is None:
        path = DEFAULT_SSH_CONFIG.expanduser()
        field = "host"
        if not path.exists():
            return _SshConfigText(None, "", commands, field)
    if not path.exists():
        raise SshConfigError(
            f"ssh config {path} does not exist; fix the path in transport.ssh_config, or "
            "remove it to use ~/.ssh/config",
            field,
        )
    try:
        text = read_bounded_text(path, _MAX_CONFIG_BYTES)
    except InputFileError as exc:
        raise SshConfigError(f"ssh config {exc}", field) from None
    config = _SshConfigText(path, text, commands, field)
    _check_config_lines(config)
    return config


def _check_config_lines(config: _SshConfigText) -> None:
    """Every line read as paramiko reads it (its ``SETTINGS_REGEX``, ``Match`` criteria
    split with :func:`shlex.split`), so quoting cannot hide a keyword from this check.

    A line paramiko could not read is refused by its number alone: its text could be a
    line of any file a profile names (``/etc/shadow``), and errors reach CI logs. In a
    profile's own config, what paramiko acts on while the config is looked up is refused
    up front: ``Match exec`` runs a command; ``CanonicalizeHostname`` makes a DNS query
    per ``CanonicalDomains`` entry (3000 of them kept a profile's check busy past 120 s)."""
    for number, line in enumerate(config.text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        setting = re.match(paramiko.SSHConfig.SETTINGS_REGEX, line)
        if setting is None:
            raise SshConfigError(
                f"ssh config {config.path} line {number} is not a 'Keyword value' line "
                "(paramiko reads the config); fix the line, or check that the path names "
                "an ssh config file",
                config.field,
            )
        if any(hidden in line for hidden in _HIDDEN.values()):
            raise SshConfigError(
                f"ssh config {config.path} line {number} holds U+E000 or U+E001, private-use "
                "characters the harness reads the config with; remove them from the line",
                config.field,
            )
        if config.commands:
            continue
        keyword, value = setting.group(1).lower(), setting.group(2)
        if keyword == "canonicalizehostname" and value.strip('"').lower() != "no":
            raise SshConfigError(
                f"ssh config {config.path} line {number}: 'CanonicalizeHostname "
                f"{brief_plain(value)}' makes DNS queries while the profile is read, "
                "which could keep the harness waiting; write HostName in full, or put the "
                "line in your own ~/.ssh/config (and drop transport.ssh_config)",
                config.field,
            )
        if keyword == "match" and any(_names_exec(word) for word in _match_words(value)):
            raise SshConfigError(
                f"ssh config {config.path} line {number}: 'Match exec' runs a command, and a "
                f"device profile may not run commands; {_COMMANDS_FIX}",
                config.field,
            )


def _match_words(criteria: str) -> list[str]:
    """A ``Match`` line's words as paramiko splits them; both splits when quotes are
    unbalanced (paramiko then refuses the line, but only when it is looked up)."""
    try:
        return shlex.split(criteria) + criteria.split()
    except ValueError:
        return criteria.split()


def _names_exec(word: str) -> bool:
    """``exec``, ``!exec`` or ``exec=...`` in any case: stricter than paramiko's match."""
    name = word.lstrip("!").lower()
    return name == "exec" or name.startswith("exec=")


_COMMANDS_FIX = "put it in your own ~/.ssh/config (and drop transport.ssh_config), or use ProxyJump"
# Over a thousand Host blocks. paramiko's lookup costs ~0.5 ms per block (5.1, measured:
# 2.6 s for 256 KiB), and the route to a board takes one lookup per hop.
_MAX_CONFIG_BYTES = 64 << 10
# About ten thousand hashed entries; a known_hosts file is read once per connection.
MAX_KNOWN_HOSTS_BYTES = 4 << 20
MAX_KEY_FILE_BYTES = 64 << 10  # a 16384-bit RSA key is about 12 KiB


def resolve_route(profile: SshSettings) -> tuple[Hop, ...]:
    """Jump hosts first, the board last."""
    config = _read_ssh_config(profile.ssh_config, profile.config_commands)
    return tuple(
        _resolve(
            config,
            profile.host,
            profile.port,
            profile.user,
            profile.identity_file,
            profile.known_hosts,
            profile.proxy_jump,
            depth=0,
        )
    )


def _resolve(
    config: _SshConfigText,
    host: str,
    port: int | None,
    user: str | None,
    identity_file: Path | None,
    known_hosts: Path | None,
    proxy_jump: str | None,
    depth: int,
) -> list[Hop]:
    """The hops to ``host``; ``host``, ``port`` and ``user`` are checked already, and
    every value the config adds is checked here before it is used."""
    if depth > MAX_JUMPS:
        raise SshConfigError(
            f"ProxyJump chain to {host} is longer than {MAX_JUMPS}: a loop?", config.field
        )
    entry = config.lookup(host, port, user)
    where = config.where(host)
    jump, proxy_command = _proxies(config, entry, host, where, proxy_jump)
    checked = _Checked(where, config.field)
    hostname = checked("HostName", check_host, entry.get("hostname", host))
    resolved_port = checked("Port", port_from_text, str(entry.get("port", 22)))
    resolved_user = checked("User", check_user, entry.get("user") or getpass.getuser())
    specs = checked("ProxyJump", parse_jumps, jump) if jump else []
    hop = Hop(
        name=host,
        hostname=hostname,
        port=resolved_port,
        user=resolved_user,
        identity_files=_identity_files(entry, identity_file, checked),
        known_hosts=_known_hosts_files(entry, known_hosts, checked),
        proxy_command=proxy_command,
    )
    if not specs:
        return [hop]
    first_user, first_host, first_port = specs[0]
    route = _resolve(config, first_host, first_port, first_user, None, known_hosts, None, depth + 1)
    for jump_user, jump_host, jump_port in specs[1:]:
        route += _resolve(
            config, jump_host, jump_port, jump_user, None, known_hosts, "none", depth + 1
        )
    return [*route, hop]


class _Checked:
    """``checked(keyword, check, value)``: ``check(value)``, its refusal an
    :class:`SshConfigError` naming the config entry ``where`` and the keyword."""

    def __init__(self, where: str, field: str) -> None:
        self.where, self.field = where, field

    def __call__(self, keyword: str, check: Callable[[Any], _T], value: object) -> _T:
        try:
            return check(value)
        except ValueError as exc:  # ValueRuleError, or shlex's unbalanced quotes
            raise SshConfigError(f"{self.where}: {keyword}: {exc}", self.field) from None


def _proxies(
    config: _SshConfigText,
    entry: dict[str, Any],
    host: str,
    where: str,
    proxy_jump: str | None,
) -> tuple[str | None, str | None]:
    """The hop's ProxyJump and ProxyCommand (tokens expanded): at most one of them, and a
    command only where the profile allows commands."""
    jump = _unless_none(proxy_jump if proxy_jump is not None else entry.get("proxyjump"))
    proxy_command = _unless_none(entry.get("proxycommand"))
    if proxy_command is not None:
        proxy_command = _expand_proxy_tokens(proxy_command, host, where, config.field)
    if jump and proxy_command:
        raise SshConfigError(
            f"{where}: both ProxyJump and ProxyCommand are set; keep one", config.field
        )
    if proxy_command and not config.commands:
        raise SshConfigError(
            f"{where}: ProxyCommand runs a command, and a device profile may not run "
            f"commands; {_COMMANDS_FIX}",
            config.field,
        )
    return jump, proxy_command


def _identity_files(
    entry: dict[str, Any], identity_file: Path | None, checked: _Checked
) -> tuple[Path, ...]:
    """The profile's identity file, else the config's IdentityFile entries."""
    if identity_file is not None:
        return (identity_file,)
    return tuple(checked("IdentityFile", expand_home, p) for p in entry.get("identityfile", []))


def _known_hosts_files(
    entry: dict[str, Any], known_hosts: Path | None, checked: _Checked
) -> tuple[Path, ...]:
    """The profile's known_hosts, else the config's UserKnownHostsFile, else ssh's own."""
    if known_hosts is not None:
        return (known_hosts,)
    if "userknownhostsfile" in entry:
        files = checked("UserKnownHostsFile", shlex.split, entry["userknownhostsfile"])
        return tuple(checked("UserKnownHostsFile", expand_home, p) for p in files)
    return (DEFAULT_KNOWN_HOSTS.expanduser(),)


def _expand_proxy_tokens(command: str, host: str, where: str, field: str) -> str:
    """``command`` with the ProxyCommand tokens paramiko leaves (``%%``, ``%n``) expanded.

    OpenSSH's ProxyCommand takes %%, %h, %n, %p and %r and refuses any other token;
    paramiko expands ~, %h, %p and %r only and passes the rest on to the shell (a %% it
    never saw, see :meth:`_SshConfigText.lookup`). ``host``, ``port`` and ``user`` are
    checked words with no ``%``, so a ``%`` still here came from the config.
    """

    def expand(token: re.Match[str]) -> str:
        if token[1] == "%":
            return "%"
        if token[1] == "n":
            return host  # the host name as given, before HostName
        raise SshConfigError(
            f"{where}: ProxyCommand: unknown token '%{token[1]}'; OpenSSH takes %%, %h, %n, "
            "%p and %r there (write %% for a literal %)",
            field,
        )

    return _PROXY_TOKEN.sub(expand, command)


def _unless_none(value: str | None) -> str | None:
    return None if value is None or value.strip().lower() in ("", "none") else value
