"""Errors of the ssh transport's settings and host-key checks."""

from __future__ import annotations

from harness.errors import UsageError
from harness.transport.base import (
    DeviceUnavailable,
)


class SshConfigError(ValueError, UsageError):
    """The SSH settings are malformed or contradict each other; the message says which.

    ``field`` is the SshSettings field (profile ``transport.FIELD``) the trouble traces to.
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
