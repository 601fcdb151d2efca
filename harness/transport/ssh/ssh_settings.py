"""Where a board is and how to log in: :class:`SshSettings`, checked on construction."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.transport.ssh.host_keys import (
    HostKeyPin,
)
from harness.transport.ssh.setting_errors import (
    SshConfigError,
)
from harness.untrusted.reading import brief
from harness.untrusted.value_rules import (
    ValueRuleError,
    check_host,
    check_port,
    check_seconds,
    check_user,
    port_from_text,
)

DEFAULT_SSH_CONFIG = Path("~/.ssh/config")
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
MAX_JUMPS = 8


@dataclass(frozen=True)
class SshSettings:
    """Where a board is and how to log in; unset fields come from the ssh config.

    ``host_key`` pins the board's key, as ``"ssh-ed25519 AAAA..."`` (a known_hosts
    or ``.pub`` line) or as ``"SHA256:..."`` (what ``ssh-keygen -lf`` prints); when
    it is set, known_hosts is not consulted for the board (jump hosts still are).

    Host, user, port and ProxyJump entries are checked on construction
    (:mod:`harness.untrusted.value_rules`), and so are the values the ssh config adds, when
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
    work_dir_where: str = "work_dir"  # names the profile's work_dir in errors
    connect_timeout: float = 20.0
    keepalive_interval: float = 5.0
    config_commands: bool = True

    def __post_init__(self) -> None:
        checks: list[tuple[str, Callable[[Any], object], object]] = [
            ("host", check_host, self.host),
            ("port", check_port, self.port),
            ("user", check_user, self.user),
            ("proxy_jump", parse_jumps, self.proxy_jump),
            ("keepalive_interval", check_seconds, self.keepalive_interval),
        ]
        for field, check, value in checks:
            if value is not None:
                try:
                    check(value)
                except ValueRuleError as exc:
                    raise SshConfigError(str(exc), field) from None
        if self.host_key is not None:
            HostKeyPin.parse(self.host_key)


def parse_jumps(text: str) -> list[tuple[str | None, str, int | None]]:
    """``[user@]host[:port][,...]`` (``[v6addr]:port`` too), every part checked; at most
    :data:`MAX_JUMPS` entries (each costs an ssh config lookup when the route is resolved)."""
    entries = text.split(",")
    if len(entries) > MAX_JUMPS:
        raise ValueRuleError(
            f"{len(entries)} ProxyJump entries; at most {MAX_JUMPS} jump hosts are allowed"
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
        specs.append(
            (
                check_user(user) if user else None,
                check_host(match["h6"] or match["h"]),
                port_from_text(port) if port is not None else None,
            )
        )
    return specs
