"""Linux boards over SSH, with paramiko.

One SSH connection per transport, opened on first use, kept alive with keepalives
and reopened when it has died. Commands run in exec channels as shell text built
from argv with :func:`harness.transport.shell_line.shell_line` (every word quoted, so
arguments are data); files move over SFTP. The route to the board follows the profile and
``~/.ssh/config`` (Host aliases, HostName, Port, User, IdentityFile,
UserKnownHostsFile, ProxyJump, ProxyCommand).

Host keys are always verified, against a key or fingerprint pinned in the profile
or against known_hosts; an unknown or changed key raises :class:`HostKeyUnknown` /
:class:`HostKeyMismatch` before any credential or command is sent.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import getpass
import hashlib
import os
import posixpath
import re
import secrets
import select
import shlex
import socket
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import paramiko

from harness.lifecycle.process import ManagedProcess
from harness.transport.base import (
    ByteStream,
    CommandResult,
    DeviceFacts,
    DeviceUnavailable,
    Transport,
    TransportError,
    TransportLost,
    TransportTimeout,
)
from harness.transport.shell_line import shell_line
from harness.untrusted_input import InputFileError, brief, brief_plain, read_bounded_text
from harness.value_rules import (
    ValueRuleError,
    check_host,
    check_port,
    check_seconds,
    check_user,
    port_from_text,
)

DEFAULT_SSH_CONFIG = Path("~/.ssh/config")
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
_ABIS = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_MAX_JUMPS = 8
_STDERR_TAIL_BYTES = 8192
_STREAM_CLOSE_GRACE = 2.0
_EXIT_STATUS_WAIT = 1.0
_KILL_TIMEOUT = 5.0
_T = TypeVar("_T")


class SshConfigError(ValueError):
    """The SSH settings are malformed or contradict each other; the message says which.

    ``field`` is the SshProfile field (profile ``transport.FIELD``) the trouble traces to.
    """

    def __init__(self, message: str, field: str = "host") -> None:
        super().__init__(message)
        self.field = field


class HostKeyRejected(DeviceUnavailable):
    """The host's key could not be verified, so the connection was refused."""


class HostKeyUnknown(HostKeyRejected):
    """The host offered a key that neither the profile nor known_hosts knows."""


class HostKeyMismatch(HostKeyRejected):
    """The host offered a key other than the one pinned or recorded for it."""


@dataclass(frozen=True)
class SshProfile:
    """Where a board is and how to log in; unset fields come from the ssh config.

    ``host_key`` pins the board's key, as ``"ssh-ed25519 AAAA..."`` (a known_hosts
    or ``.pub`` line) or as ``"SHA256:..."`` (what ``ssh-keygen -lf`` prints); when
    it is set, known_hosts is not consulted for the board (jump hosts still are).

    Host, user, port and ProxyJump entries are checked on construction
    (:mod:`harness.value_rules`), and so are the values the ssh config adds, when
    the route is resolved. ``config_commands`` says whether the ssh config may run
    commands (ProxyCommand, Match exec): true for the user's own ``~/.ssh/config``
    and for configs the harness writes, false for a config a device profile names.
    """

    host: str  # a host name, an address, or a Host alias of the ssh config
    port: int | None = None
    user: str | None = None
    identity_file: Path | None = None
    ssh_config: Path | None = None  # None: ~/.ssh/config if it exists
    known_hosts: Path | None = None  # None: UserKnownHostsFile, else ~/.ssh/known_hosts
    host_key: str | None = None
    proxy_jump: str | None = None  # "[user@]host[:port][,...]", overrides the config
    use_agent: bool = True
    work_dir: str = "/tmp/et-harness"
    connect_timeout: float = 20.0
    keepalive_interval: float = 5.0
    config_commands: bool = True

    def __post_init__(self) -> None:
        checks: list[tuple[str, Callable[[Any], object], object]] = [
            ("host", check_host, self.host),
            ("port", check_port, self.port),
            ("user", check_user, self.user),
            ("proxy_jump", _parse_jumps, self.proxy_jump),
            ("keepalive_interval", check_seconds, self.keepalive_interval),
        ]
        for field, check, value in checks:
            if value is not None:
                try:
                    check(value)
                except ValueRuleError as exc:
                    raise SshConfigError(str(exc), field) from None
        if self.host_key is not None:
            _HostKeyPin.parse(self.host_key)


def fingerprint_of_public_key(public_key: str) -> str:
    """``SHA256:...`` of ``"ssh-ed25519 AAAA..."``, as ``ssh-keygen -l`` prints it."""
    try:
        blob = base64.b64decode(public_key.split()[1], validate=True)
    except (IndexError, binascii.Error):
        raise SshConfigError(
            f"not a public key line ('TYPE BASE64'): {brief(public_key)}", "host_key"
        ) from None
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def _tracked(command: str) -> str:
    """``command`` behind a line with the shell's pid, which leads its process group.

    The shell stays the parent (``exit $?`` keeps it from exec'ing), so the exit
    code reports a death by signal N as 128+N, and the group can be killed.
    """
    return f"echo $$; {command}; exit $?"


@dataclass(frozen=True)
class _HostKeyPin:
    """A key or fingerprint the profile insists the board has."""

    fingerprint: str
    key: paramiko.PKey | None

    @classmethod
    def parse(cls, text: str) -> _HostKeyPin:
        text = text.strip()
        if text.startswith("SHA256:"):
            digest = text[len("SHA256:") :]
            try:
                raw = base64.b64decode(digest + "=" * (-len(digest) % 4), validate=True)
            except binascii.Error:
                raw = b""
            if len(raw) != 32:
                raise SshConfigError(
                    f"host_key {brief(text)}: not a SHA256 fingerprint", "host_key"
                )
            return cls(fingerprint=text, key=None)
        parts = text.split()
        if len(parts) < 2:
            raise SshConfigError(
                f"host_key {brief(text)}: give 'ssh-ed25519 AAAA...' or 'SHA256:...'", "host_key"
            )
        try:
            key = paramiko.PKey.from_type_string(parts[0], base64.b64decode(parts[1]))
        except (binascii.Error, paramiko.SSHException, ValueError) as exc:
            raise SshConfigError(
                f"host_key {brief(text)}: not a usable key: {exc}", "host_key"
            ) from None
        return cls(fingerprint=key.fingerprint, key=key)


@dataclass(frozen=True)
class _Hop:
    """One SSH server on the route to the board, with its settings resolved."""

    name: str  # as the profile or ProxyJump wrote it
    hostname: str
    port: int
    user: str
    identity_files: tuple[Path, ...]
    known_hosts: tuple[Path, ...]
    proxy_command: str | None

    @property
    def known_hosts_name(self) -> str:
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"

    def __str__(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


@dataclass(frozen=True)
class _SshConfigText:
    """The text of an ssh config file, looked up one host at a time."""

    path: Path | None  # None: there is no config
    text: str
    commands: bool  # whether ProxyCommand and Match exec are honoured
    field: str  # the SshProfile field errors in it are reported under

    def lookup(self, host: str, port: int | None, user: str | None) -> paramiko.SSHConfigDict:
        """``host``'s options, with ``port`` and ``user`` taking precedence over the file's,
        as ``ssh -p PORT -l USER`` gives them: ProxyCommand's ``%p`` and ``%r`` expand to
        them. ``host``, ``user`` and ``port`` have passed :mod:`harness.value_rules`, so
        they are plain words in this text."""
        override = [f"Host {host}"]
        if port is not None:
            override.append(f"    Port {port}")
        if user is not None:
            override.append(f"    User {user}")
        text = "\n".join(override) + "\nHost *\n" + self.text
        try:
            return paramiko.SSHConfig.from_text(text).lookup(host)
        except (paramiko.ConfigParseError, ValueError) as exc:
            raise SshConfigError(f"ssh config {self.path}: {exc}", self.field) from None

    def where(self, host: str) -> str:
        return f"ssh config {self.path}, Host {host}"


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
    if not commands:
        _refuse_untrusted_directives(config)
    return config


def _refuse_untrusted_directives(config: _SshConfigText) -> None:
    """What paramiko acts on while the config is looked up, refused up front: ``Match
    exec`` runs a command; ``CanonicalizeHostname`` makes a DNS query per
    ``CanonicalDomains`` entry (3000 of them kept a profile's check busy past 120 s)."""
    for number, line in enumerate(config.text.splitlines(), 1):
        words = line.strip().replace("=", " ", 1).split()
        if (
            len(words) > 1
            and words[0].lower() == "canonicalizehostname"
            and words[1].lower() != "no"
        ):
            raise SshConfigError(
                f"ssh config {config.path} line {number}: 'CanonicalizeHostname "
                f"{brief_plain(words[1])}' makes DNS queries while the profile is read, "
                "which could keep the harness waiting; write HostName in full, or put the "
                "line in your own ~/.ssh/config (and drop transport.ssh_config)",
                config.field,
            )
        if words and words[0].lower() == "match" and any(
            word.lstrip("!").lower() == "exec" for word in words[1:]
        ):
            raise SshConfigError(
                f"ssh config {config.path} line {number}: 'Match exec' runs a command, and a "
                f"device profile may not run commands; {_COMMANDS_FIX}",
                config.field,
            )


_COMMANDS_FIX = (
    "put it in your own ~/.ssh/config (and drop transport.ssh_config), or use ProxyJump"
)
# Over a thousand Host blocks. paramiko's lookup costs ~0.5 ms per block (5.1, measured:
# 2.6 s for 256 KiB), and the route to a board takes one lookup per hop.
_MAX_CONFIG_BYTES = 64 << 10
# About ten thousand hashed entries; a known_hosts file is read once per connection.
_MAX_KNOWN_HOSTS_BYTES = 4 << 20
_MAX_KEY_FILE_BYTES = 64 << 10  # a 16384-bit RSA key is about 12 KiB


def resolve_route(profile: SshProfile) -> tuple[_Hop, ...]:
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
) -> list[_Hop]:
    """The hops to ``host``; ``host``, ``port`` and ``user`` are checked already, and
    every value the config adds is checked here before it is used."""
    if depth > _MAX_JUMPS:
        raise SshConfigError(
            f"ProxyJump chain to {host} is longer than {_MAX_JUMPS}: a loop?", config.field
        )
    entry = config.lookup(host, port, user)
    where = config.where(host)
    jump = _unless_none(proxy_jump if proxy_jump is not None else entry.get("proxyjump"))
    proxy_command = _unless_none(entry.get("proxycommand"))
    if jump and proxy_command:
        raise SshConfigError(f"{where}: both ProxyJump and ProxyCommand are set; keep one",
                             config.field)
    if proxy_command and not config.commands:
        raise SshConfigError(
            f"{where}: ProxyCommand runs a command, and a device profile may not run "
            f"commands; {_COMMANDS_FIX}",
            config.field,
        )

    def checked(keyword: str, check: Callable[[Any], _T], value: object) -> _T:
        try:
            return check(value)
        except ValueError as exc:  # ValueRuleError, or shlex's unbalanced quotes
            raise SshConfigError(f"{where}: {keyword}: {exc}", config.field) from None

    hostname = checked("HostName", check_host, entry.get("hostname", host))
    resolved_port = checked("Port", port_from_text, str(entry.get("port", 22)))
    resolved_user = checked("User", check_user, entry.get("user") or getpass.getuser())
    specs = checked("ProxyJump", _parse_jumps, jump) if jump else []
    if identity_file is not None:
        identities: tuple[Path, ...] = (identity_file,)
    else:
        identities = tuple(Path(p).expanduser() for p in entry.get("identityfile", []))
    if known_hosts is not None:
        known: tuple[Path, ...] = (known_hosts,)
    elif "userknownhostsfile" in entry:
        files = checked("UserKnownHostsFile", shlex.split, entry["userknownhostsfile"])
        known = tuple(Path(p).expanduser() for p in files)
    else:
        known = (DEFAULT_KNOWN_HOSTS.expanduser(),)
    hop = _Hop(
        name=host,
        hostname=hostname,
        port=resolved_port,
        user=resolved_user,
        identity_files=identities,
        known_hosts=known,
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


def _unless_none(value: str | None) -> str | None:
    return None if value is None or value.strip().lower() in ("", "none") else value


def _parse_jumps(text: str) -> list[tuple[str | None, str, int | None]]:
    """``[user@]host[:port][,...]`` (``[v6addr]:port`` too), every part checked; at most
    :data:`_MAX_JUMPS` entries (each costs an ssh config lookup when the route is resolved)."""
    entries = text.split(",")
    if len(entries) > _MAX_JUMPS:
        raise ValueRuleError(
            f"{len(entries)} ProxyJump entries; at most {_MAX_JUMPS} jump hosts are allowed"
        )
    specs = []
    for spec in entries:
        user, _, rest = spec.strip().rpartition("@")
        match = re.fullmatch(
            r"\[(?P<h6>[^\]]+)\](?::(?P<p6>[^:]*))?|(?P<h>[^:\[\]]+)(?::(?P<p>[^:]*))?", rest
        )
        if not match:
            raise ValueRuleError(f"ProxyJump entry {brief(spec)}: expected [user@]host[:port]")
        port = match["p6"] if match["p6"] is not None else match["p"]
        specs.append((
            check_user(user) if user else None,
            check_host(match["h6"] or match["h"]),
            port_from_text(port) if port is not None else None,
        ))
    return specs


class _VerifyHostKey(paramiko.MissingHostKeyPolicy):
    """Called for keys known_hosts lacks: accept only a pinned fingerprint, else refuse."""

    def __init__(self, hop: _Hop, pin: _HostKeyPin | None) -> None:
        self._hop = hop
        self._pin = pin

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if self._pin is not None and self._pin.key is None:
            if key.fingerprint == self._pin.fingerprint:
                return
            raise HostKeyMismatch(
                f"{hostname} offered host key {key.get_name()} {key.fingerprint}, but the "
                f"profile pins {self._pin.fingerprint}. The device may have been re-imaged, "
                "or someone is intercepting the connection. If the new key is right, set "
                f'host_key: "{key.get_name()} {key.get_base64()}" in the profile.'
            )
        files = ", ".join(str(p) for p in self._hop.known_hosts)
        raise HostKeyUnknown(
            f"{hostname} offered host key {key.get_name()} {key.fingerprint}, which is not "
            f"in {files} and not pinned. Check the fingerprint on the device "
            f"(ssh-keygen -lf /etc/ssh/ssh_host_{_key_file_kind(key)}_key.pub); if it matches, "
            f'pin it in the profile as host_key: "{key.get_name()} {key.get_base64()}" '
            f'(or host_key: "{key.fingerprint}"), or add this line to {self._hop.known_hosts[0]}:\n'
            f"{hostname} {key.get_name()} {key.get_base64()}"
        )


def _key_file_kind(key: paramiko.PKey) -> str:
    name = key.get_name()
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(name, "ecdsa")


class _Watchdog:
    """Closes a channel whose operation outlives ``seconds``: paramiko waits for some
    replies (exec, subsystem) without a timeout, and a frozen host never sends them."""

    def __init__(self, channel: paramiko.Channel, seconds: float) -> None:
        self._channel = channel
        self._timer = threading.Timer(max(seconds, 0.0), self._expire)
        self._timer.daemon = True
        self.expired = False

    def _expire(self) -> None:
        self.expired = True
        self._channel.close()

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


class _Connection:
    """One live route: an SSHClient per hop (the board last) and the ProxyCommand, if any."""

    def __init__(
        self, clients: list[paramiko.SSHClient], proxy: ManagedProcess | None
    ) -> None:
        self.clients = clients
        self.proxy = proxy
        self.sftp: paramiko.SFTPClient | None = None

    @property
    def transport(self) -> paramiko.Transport:
        transport = self.clients[-1].get_transport()
        assert transport is not None
        return transport

    def alive(self) -> bool:
        transport = self.clients[-1].get_transport()
        return transport is not None and transport.is_active()

    def close(self) -> None:
        if self.sftp is not None:
            self.sftp.close()
        for client in reversed(self.clients):
            client.close()
        if self.proxy is not None:
            _end_process(self.proxy)


def _dial(hop: _Hop, timeout: float) -> socket.socket:
    """A TCP connection to ``hop`` with Nagle off: with it on, every command waits
    about 40 ms for a delayed ACK (measured: 44 ms per command, 2 ms without)."""
    try:
        sock = socket.create_connection((hop.hostname, hop.port), timeout=timeout)
    except TimeoutError:
        raise DeviceUnavailable(
            f"{hop}: no answer within {timeout:.0f} s: is the device on and reachable?"
        ) from None
    except OSError as exc:
        raise DeviceUnavailable(
            f"{hop}: cannot connect: {exc.strerror or exc}. Is sshd running there and the "
            "address and port right?"
        ) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _spawn_proxy_command(command: str) -> tuple[socket.socket, ManagedProcess]:
    """Run an ssh config ProxyCommand (trusted config text, run as OpenSSH does, with
    ``sh -c``) on one end of a socket pair; paramiko gets the other end, so the
    proxy's exit reads as a closed socket."""
    ours, theirs = socket.socketpair()
    with theirs:
        process = ManagedProcess(
            ["/bin/sh", "-c", f"exec {command}"], name="ProxyCommand",
            stdin=theirs.fileno(), stdout=theirs.fileno(),
        )  # fmt: skip
    return ours, process


def _end_process(process: ManagedProcess) -> str:
    """Stop a local helper process; what it wrote to stderr."""
    process.stop()
    return process.stderr_tail().strip()


class SshTransport(Transport):
    """A Linux board reached over SSH (see the module docstring)."""

    def __init__(self, profile: SshProfile) -> None:
        self.profile = profile
        self.route = resolve_route(profile)
        self._pin = _HostKeyPin.parse(profile.host_key) if profile.host_key else None
        self._connection: _Connection | None = None
        self._lock = threading.Lock()
        self._facts: DeviceFacts | None = None
        self.name = f"ssh {profile.host}"

    # -- connection ---------------------------------------------------------

    def connect(self) -> None:
        """Open the connection now (it is otherwise opened on first use)."""
        self._live()

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _live(self) -> _Connection:
        with self._lock:
            if self._connection is not None and self._connection.alive():
                return self._connection
            if self._connection is not None:
                self._connection.close()
                self._connection = None
            self._connection = self._open_route()
            return self._connection

    def _open_route(self) -> _Connection:
        timeout = self.profile.connect_timeout
        clients: list[paramiko.SSHClient] = []
        proxy: ManagedProcess | None = None
        sock: Any = None
        try:
            for index, hop in enumerate(self.route):
                if index == 0 and hop.proxy_command:
                    sock, proxy = _spawn_proxy_command(hop.proxy_command)
                elif index == 0:
                    sock = _dial(hop, timeout)
                is_board = index == len(self.route) - 1
                clients.append(self._login(hop, sock, self._pin if is_board else None))
                if not is_board:
                    sock = self._tunnel(clients[-1], hop, self.route[index + 1], timeout)
        except BaseException as exc:
            for client in reversed(clients):
                client.close()
            if sock is not None:
                sock.close()
            proxy_said = _end_process(proxy) if proxy is not None else ""
            if (
                proxy_said
                and isinstance(exc, DeviceUnavailable)
                and not isinstance(exc, HostKeyRejected)
            ):
                raise DeviceUnavailable(f"{exc}; the ProxyCommand said: {proxy_said}") from exc
            raise
        return _Connection(clients, proxy)

    def _login(self, hop: _Hop, sock: Any, pin: _HostKeyPin | None) -> paramiko.SSHClient:
        timeout = self.profile.connect_timeout
        client = paramiko.SSHClient()
        if pin is not None and pin.key is not None:
            client.get_host_keys().add(hop.known_hosts_name, pin.key.get_name(), pin.key)
        elif pin is None:
            for path in hop.known_hosts:
                if path.is_file():
                    try:
                        # Bounded first: paramiko reads the whole file, and a profile may
                        # name any file here (/proc/self/pagemap: 256 GB of one line).
                        read_bounded_text(path, _MAX_KNOWN_HOSTS_BYTES)
                        client.load_system_host_keys(str(path))
                    except InputFileError as exc:
                        raise SshConfigError(f"known_hosts {exc}", "known_hosts") from None
                    except (OSError, paramiko.SSHException) as exc:
                        raise SshConfigError(
                            f"known_hosts {path} is unreadable: {exc}", "known_hosts"
                        ) from None
        client.set_missing_host_key_policy(_VerifyHostKey(hop, pin))
        identities = [str(p) for p in hop.identity_files if p.is_file()]
        for identity in identities:  # paramiko reads a key file whole, and its -cert.pub
            for key_file in (Path(identity), Path(f"{identity}-cert.pub")):
                if key_file.is_file():
                    try:
                        read_bounded_text(key_file, _MAX_KEY_FILE_BYTES)
                    except InputFileError as exc:
                        raise SshConfigError(f"identity file {exc}", "identity_file") from None
        try:
            client.connect(
                hop.hostname,
                hop.port,
                username=hop.user,
                key_filename=identities or None,  # type: ignore[arg-type]  # paramiko takes a list
                allow_agent=self.profile.use_agent,
                look_for_keys=not hop.identity_files,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
                sock=sock,
            )
        except HostKeyRejected:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            source = "the profile's host_key" if pin else ", ".join(str(p) for p in hop.known_hosts)
            raise HostKeyMismatch(
                f"{hop.known_hosts_name} offered host key {exc.key.get_name()} "
                f"{exc.key.fingerprint}, but {source} has {exc.expected_key.get_name()} "
                f"{exc.expected_key.fingerprint}. The device may have been re-imaged, or someone "
                "is intercepting the connection. If the new key is right, remove the old one "
                f"(ssh-keygen -R '{hop.known_hosts_name}' -f FILE) and pin the new one: "
                f'host_key: "{exc.key.get_name()} {exc.key.get_base64()}".'
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise self._authentication_failed(hop, identities, str(exc)) from None
        except TimeoutError:
            client.close()
            raise DeviceUnavailable(
                f"{hop}: no answer within {timeout:.0f} s: is the device on and reachable?"
            ) from None
        except (OSError, paramiko.SSHException, EOFError) as exc:
            client.close()
            if "No authentication methods available" in str(exc):  # paramiko had no key at all
                raise self._authentication_failed(hop, identities, "no key to offer") from None
            raise DeviceUnavailable(
                f"{hop}: cannot connect: {exc or type(exc).__name__}. Is sshd running "
                "there and the address and port right?"
            ) from None
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(self.profile.keepalive_interval)
        return client

    def _authentication_failed(
        self, hop: _Hop, identities: list[str], why: str
    ) -> DeviceUnavailable:
        tried = ", ".join(identities) or "no key files"
        agent = " and the ssh-agent" if self.profile.use_agent else ""
        return DeviceUnavailable(
            f"{hop}: authentication failed ({why}); tried {tried}{agent}. Add your public "
            f"key to ~{hop.user}/.ssh/authorized_keys on the device, or set identity_file "
            "(encrypted keys must be loaded into ssh-agent)."
        )

    @staticmethod
    def _tunnel(
        client: paramiko.SSHClient, hop: _Hop, target: _Hop, timeout: float
    ) -> paramiko.Channel:
        transport = client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0), timeout=timeout
            )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise DeviceUnavailable(
                f"jump host {hop} could not reach {target.hostname}:{target.port}: "
                f"{exc or type(exc).__name__}"
            ) from None

    # -- processes ----------------------------------------------------------

    def _start(self, command: str, timeout: float) -> paramiko.Channel:
        """An exec channel running ``command``; reconnects once if the link had died."""
        for attempt in (1, 2):
            connection = self._live()
            try:
                channel = connection.transport.open_session(timeout=timeout)
                break
            except (paramiko.SSHException, OSError, EOFError) as exc:
                if connection.alive():
                    raise TransportTimeout(
                        f"{self.name}: no channel within {timeout:.1f} s ({exc}): the device "
                        "is not answering"
                    ) from None
                if attempt == 2:
                    raise TransportLost(
                        f"{self.name}: connection lost while opening a channel"
                    ) from None
        with _Watchdog(channel, timeout) as watchdog:
            try:
                channel.exec_command(command)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                channel.close()
                if watchdog.expired:
                    raise TransportTimeout(
                        f"{self.name}: the device did not start the command within {timeout:.1f} s"
                    ) from None
                raise self._lost_or_refused(f"starting the command: {exc}") from None
        return channel

    def _lost_or_refused(self, what: str) -> TransportError:
        connection = self._connection
        if connection is None or not connection.alive():
            return TransportLost(f"{self.name}: connection lost while {what}")
        return TransportError(f"{self.name}: the device refused {what}")

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> CommandResult:
        command = shell_line(argv, env)
        deadline = time.monotonic() + timeout
        channel = self._start(_tracked(command), timeout)
        stdout = bytearray()
        stderr = bytearray()
        try:
            finished = self._exchange(channel, stdin, deadline, stdout, stderr)
        finally:
            channel.close()
        pid, _, output = bytes(stdout).partition(b"\n")
        if not finished:
            fate = "killed" if self._kill_group(pid) else "could not be killed"
            raise TransportTimeout(
                f"{self.name}: `{shlex.join(argv)[:200]}` did not finish within {timeout:.1f} s"
                f" (it {fate})"
            )
        connection = self._connection
        if channel.exit_status == -1 and (connection is None or not connection.alive()):
            raise TransportLost(
                f"{self.name}: connection lost while `{shlex.join(argv)[:200]}` ran"
            )
        if not pid.isdigit():
            raise TransportError(
                f"{self.name}: the login shell printed {pid[:80]!r} before the command's "
                "output; make the device user's shell start-up silent"
            )
        return CommandResult(tuple(argv), channel.exit_status, output, bytes(stderr))

    @staticmethod
    def _exchange(
        channel: paramiko.Channel,
        stdin: bytes,
        deadline: float,
        stdout: bytearray,
        stderr: bytearray,
    ) -> bool:
        """Feed stdin, collect both outputs until the exit status; False on timeout."""
        try:
            channel.settimeout(max(deadline - time.monotonic(), 0.001))
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
        except TimeoutError:
            return False
        except (OSError, paramiko.SSHException, EOFError):
            pass  # the process is gone; its outputs and status tell the rest
        channel.settimeout(0.0)
        out_open = err_open = True
        while out_open or err_open:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([channel], [], [], remaining)[0]:
                return False
            out_open = out_open and _drain(channel.recv, stdout)
            err_open = err_open and _drain(channel.recv_stderr, stderr)
        return channel.status_event.wait(max(deadline - time.monotonic(), 0.0))

    def _kill_group(self, pid: bytes) -> bool:
        """Best effort: kill the process group a timed-out or abandoned command leads;
        whether the device confirmed it."""
        if not pid.isdigit():
            return False
        command = shell_line(["kill", "-9", f"-{int(pid)}"])  # the form every sh accepts
        try:
            channel = self._start(command, _KILL_TIMEOUT)
        except TransportError:
            return False  # the device is unreachable; the caller reports the original trouble
        try:
            deadline = time.monotonic() + _KILL_TIMEOUT
            done = self._exchange(channel, b"", deadline, bytearray(), bytearray())
        finally:
            channel.close()
        return done and channel.exit_status == 0

    def open_stream(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> SshStream:
        command = shell_line(argv, env)
        timeout = self.profile.connect_timeout
        channel = self._start(_tracked(command), timeout)
        describe = f"{self.name}: {posixpath.basename(argv[0])}"
        stream = SshStream(channel, describe, self._connection_alive, self._kill_group)
        try:
            stream.read_pid(timeout)
        except TransportError:
            stream.close()
            raise
        return stream

    def _connection_alive(self) -> bool:
        connection = self._connection
        return connection is not None and connection.alive()

    # -- files --------------------------------------------------------------

    def _sftp(self) -> paramiko.SFTPClient:
        connection = self._live()
        if connection.sftp is not None:
            return connection.sftp
        timeout = self.profile.connect_timeout
        try:
            channel = connection.transport.open_session(timeout=timeout)
            with _Watchdog(channel, timeout):
                channel.invoke_subsystem("sftp")
            channel.settimeout(timeout)
            connection.sftp = paramiko.SFTPClient(channel)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise self._lost_or_refused(f"opening SFTP: {exc or type(exc).__name__}") from None
        return connection.sftp

    def push(self, local: Path, remote: str) -> None:
        sftp = self._sftp()
        directory, name = posixpath.split(remote)
        staging = posixpath.join(directory, f".{name}.et-{secrets.token_hex(4)}")
        try:
            _make_dirs(sftp, directory)
            sftp.put(str(local), staging)
            sftp.chmod(staging, stat.S_IMODE(local.stat().st_mode))
            # Renaming in place keeps a running copy intact (no ETXTBSY) and never
            # leaves a half-written file under the real name.
            sftp.posix_rename(staging, remote)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            if self._connection_alive():
                with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                    sftp.remove(staging)
            self._file_failure(exc, f"pushing {local} to {remote}")

    def pull(self, remote: str, local: Path) -> None:
        sftp = self._sftp()
        local.parent.mkdir(parents=True, exist_ok=True)
        staging = local.with_name(f".{local.name}.et-{secrets.token_hex(4)}")
        try:
            sftp.get(remote, str(staging))
            os.replace(staging, local)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            staging.unlink(missing_ok=True)
            self._file_failure(exc, f"pulling {remote}")

    def _file_failure(self, exc: BaseException, what: str) -> None:
        if isinstance(exc, TimeoutError):
            raise TransportTimeout(f"{self.name}: no answer while {what}") from None
        if not self._connection_alive():
            raise TransportLost(f"{self.name}: connection lost while {what}") from None
        if isinstance(exc, FileNotFoundError) or getattr(exc, "errno", None) == 2:
            raise FileNotFoundError(f"{self.name}: {what}: no such file or directory") from None
        raise TransportError(f"{self.name}: {what} failed: {exc}") from None

    # -- facts --------------------------------------------------------------

    def facts(self) -> DeviceFacts:
        if self._facts is None:
            result = self.run(["uname", "-s", "-m"], timeout=self.profile.connect_timeout)
            words = result.stdout.decode("utf-8", "replace").split()
            if result.exit_code != 0 or len(words) != 2:
                raise TransportError(f"{self.name}: `uname -s -m` failed: {result.stderr!r}")
            system, machine = words
            self._facts = DeviceFacts(
                abi=_ABIS.get(machine, machine), os=system.lower(), work_dir=self.profile.work_dir
            )
        return self._facts


def _drain(read: Callable[[int], bytes], into: bytearray) -> bool:
    """Take what is buffered without blocking; False once the stream has ended."""
    while True:
        try:
            chunk = read(65536)
        except TimeoutError:
            return True
        if not chunk:
            return False
        into += chunk


def _make_dirs(sftp: paramiko.SFTPClient, directory: str) -> None:
    if directory in ("", "/", "."):
        return
    try:
        sftp.stat(directory)
        return
    except FileNotFoundError:
        pass
    _make_dirs(sftp, posixpath.dirname(directory.rstrip("/")))
    try:
        sftp.mkdir(directory)
    except OSError:
        sftp.stat(directory)  # made meanwhile by someone else is fine; else raise


class SshStream(ByteStream):
    """A remote process's stdin and stdout over one exec channel; stderr is kept as a tail."""

    def __init__(
        self,
        channel: paramiko.Channel,
        describe: str,
        connection_alive: Callable[[], bool],
        kill_group: Callable[[bytes], bool],
        write_timeout: float = 30.0,
    ) -> None:
        self._channel = channel
        self._describe = describe
        self._connection_alive = connection_alive
        self._kill_group = kill_group
        self._write_timeout = write_timeout
        self._buffer = bytearray()
        self._stderr = bytearray()
        self._pid = b""
        self._closed = False
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, name=f"stderr:{describe}", daemon=True
        )
        self._stderr_thread.start()

    def _drain_stderr(self) -> None:
        while True:
            try:
                chunk = self._channel.recv_stderr(4096)
            except TimeoutError:
                continue  # the channel's timeout is set by the reader; keep waiting
            if not chunk:
                return
            self._stderr += chunk
            del self._stderr[:-_STDERR_TAIL_BYTES]

    def read_pid(self, timeout: float) -> None:
        """Read the line the tracking wrapper prints first (see :func:`_tracked`)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            self._fill(deadline, timeout)
        pid, _, rest = bytes(self._buffer).partition(b"\n")
        if not pid.isdigit():
            raise TransportError(
                f"{self._describe}: the login shell printed {pid[:80]!r} before the "
                "program's output; make the device user's shell start-up silent"
            )
        self._pid = pid
        self._buffer = bytearray(rest)

    def _lost(self, what: str) -> TransportLost:
        # The exit status follows the end of output closely; give it a moment to arrive.
        self._channel.status_event.wait(_EXIT_STATUS_WAIT)
        if not self._connection_alive():
            cause = "the connection to the device was lost"
        elif self._channel.exit_status_ready():
            cause = f"the process exited with status {self._channel.exit_status}"
        else:
            cause = "the process closed its output"
        tail = self.stderr_tail()
        detail = f"; its stderr ends with:\n{tail}" if tail else ""
        return TransportLost(f"{self._describe}: {what}: {cause}{detail}")

    def _fill(self, deadline: float, timeout: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TransportTimeout(
                f"{self._describe}: no answer within {timeout:.1f} s "
                f"(have {len(self._buffer)} bytes)"
            )
        self._channel.settimeout(remaining)
        try:
            chunk = self._channel.recv(65536)
        except TimeoutError:
            return
        except (OSError, paramiko.SSHException, EOFError):
            chunk = b""
        if not chunk:
            self._stderr_thread.join(timeout=1)
            raise self._lost("reading")
        self._buffer += chunk

    def read_exact(self, size: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self._buffer) < size:
            self._fill(deadline, timeout)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def write(self, data: bytes) -> None:
        if self._channel.closed or self._channel.exit_status_ready():
            raise self._lost("writing")
        self._channel.settimeout(self._write_timeout)
        try:
            self._channel.sendall(data)
        except TimeoutError:
            raise TransportTimeout(
                f"{self._describe}: the process took no input for {self._write_timeout:.0f} s"
            ) from None
        except (OSError, paramiko.SSHException, EOFError):
            raise self._lost("writing") from None

    def stderr_tail(self) -> str:
        lines = bytes(self._stderr).decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-40:])

    def close(self) -> None:
        """Close stdin; kill the process group if it has not exited within a grace period."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._channel.exit_status_ready():
                with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                    self._channel.shutdown_write()
                if not self._channel.status_event.wait(_STREAM_CLOSE_GRACE):
                    self._kill_group(self._pid)
        finally:
            self._channel.close()
            self._stderr_thread.join(timeout=1)
