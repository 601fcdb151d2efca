"""One SSH server on the route to a board (a jump host or the board), its settings
resolved (:mod:`harness.transport.ssh.route`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Hop:
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
