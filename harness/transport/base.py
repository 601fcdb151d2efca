"""What every transport offers the rest of the harness.

A transport moves files and runs programs on one device. It knows nothing about
options maps or the agent: the session layer (:mod:`harness.session`) builds command
lines and speaks the wire format over the streams a transport opens.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InfrastructureError


class TransportError(InfrastructureError):
    """Device trouble: the device, not the code under test, failed.

    The pytest plugin reports these as infrastructure errors, never as test
    failures and never as passes.
    """


class DeviceUnavailable(TransportError):
    """The device cannot be reached or used (not found, offline, unauthorized, refused)."""


class TransportLost(TransportError):
    """The connection or the remote process went away in the middle of an exchange."""


class TransportTimeout(TransportError):
    """The device did not answer within the allowed time."""


@dataclass(frozen=True)
class CommandResult:
    """The outcome of a command run to completion on the device."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True)
class DeviceFacts:
    """What the harness needs to know to deploy to a device."""

    abi: str  # "x86_64", "aarch64" (Linux), "arm64-v8a" (Android)
    os: str  # "linux", "android"
    work_dir: str  # where the harness may write (e.g. /data/local/tmp/et-harness)


class ByteStream(abc.ABC):
    """A bidirectional byte stream to a process on the device (its stdin and stdout)."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Send all of ``data``; raises :class:`TransportLost` if the peer is gone."""

    @abc.abstractmethod
    def read_exact(self, size: int, timeout: float) -> bytes:
        """Exactly ``size`` bytes; :class:`TransportTimeout` / :class:`TransportLost`."""

    @abc.abstractmethod
    def close(self) -> None:
        """End the process and release the channel; safe to call twice."""

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr, for error messages and logs."""
        return ""


class Transport(abc.ABC):
    """Files and processes on one device."""

    @abc.abstractmethod
    def facts(self) -> DeviceFacts:
        """ABI, OS and work directory of the device."""

    @abc.abstractmethod
    def push(self, local: Path, remote: str) -> None:
        """Copy a local file to ``remote`` (parent directories are created)."""

    @abc.abstractmethod
    def pull(self, remote: str, local: Path) -> None:
        """Copy ``remote`` to a local file."""

    @abc.abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> CommandResult:
        """Run ``argv`` to completion. Arguments are passed as data, never as shell text."""

    @abc.abstractmethod
    def open_stream(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> ByteStream:
        """Start ``argv`` with its stdin and stdout connected to the returned stream."""

    def sha256(self, remote: str, timeout: float = 30.0) -> str | None:
        """SHA-256 of a device file in hex, or None if it does not exist."""
        # Read on stdin: sha256sum escapes odd file names in its output, and a name
        # starting with "-" would be taken for an option.
        result = self.run(["sh", "-c", 'exec sha256sum < "$1"', "sh", remote], timeout=timeout)
        if result.exit_code != 0:
            return None
        return result.stdout.split(b" ", 1)[0].decode("ascii")

    def sha256_each(self, remotes: Sequence[str], timeout: float = 30.0) -> tuple[str | None, ...]:
        """:meth:`sha256` of several device files, in one command (one round trip)."""
        result = self.run(
            ["sh", "-c", 'for f in "$@"; do sha256sum < "$f" 2>/dev/null || echo -; done',
             "sh", *remotes],
            timeout=timeout,
        )  # fmt: skip
        lines = result.stdout.decode("ascii", "replace").splitlines()
        if result.exit_code != 0 or len(lines) != len(remotes):
            return (None,) * len(remotes)  # unknown: the files are pushed again
        digests = (line.split(" ", 1)[0] for line in lines)
        return tuple(None if d == "-" else d for d in digests)

    def remove_unfinished_pushes(self, directory: str, timeout: float = 30.0) -> None:
        """Remove, under ``directory``, the files pushes cut short left on the device (a
        board whose power went during a push keeps what reached its flash of the file it
        was writing); a transport that writes no such files has nothing to remove.

        Only for a device no push is under way on (one the harness just started or power-cycled)."""
        return  # by default no push leaves a file under another name

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the transport may be reopened by using it again."""
