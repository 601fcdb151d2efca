"""Linux boards over SSH, with paramiko (docs/ssh-emu.md).

- :mod:`.settings` — :class:`SshSettings`, where a board is and how to log in;
- :mod:`.host_keys` — pinned keys and known_hosts, never auto-accepted;
- :mod:`.route` — jump hosts and the board through the ssh config, its values checked;
- :mod:`.connection` — one connection along a route (dial, ProxyCommand, watchdog);
- :mod:`.transport` — :class:`SshTransport`: commands, SFTP, facts;
- :mod:`.stream` — :class:`SshStream`, an agent process's stdin and stdout.
"""

from harness.transport.ssh.exec_stream import SshStream
from harness.transport.ssh.host_keys import fingerprint_of_public_key
from harness.transport.ssh.route import resolve_route
from harness.transport.ssh.setting_errors import (
    HostKeyMismatch,
    HostKeyRejected,
    HostKeyUnknown,
    SshConfigError,
)
from harness.transport.ssh.ssh_settings import SshSettings
from harness.transport.ssh.transport import SshTransport

__all__ = [
    "HostKeyMismatch",
    "HostKeyRejected",
    "HostKeyUnknown",
    "SshConfigError",
    "SshSettings",
    "SshStream",
    "SshTransport",
    "fingerprint_of_public_key",
    "resolve_route",
]
