"""Host-key pinning: a key or fingerprint the profile pins, else known_hosts; never
auto-accepted (docs/security.md)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import paramiko
from paramiko.pkey import UnknownKeyType

from harness.transport.ssh.setting_errors import (
    HostKeyMismatch,
    HostKeyUnknown,
    SshConfigError,
)
from harness.untrusted.reading import brief

if TYPE_CHECKING:
    from harness.transport.ssh.hop import Hop


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


@dataclass(frozen=True)
class HostKeyPin:
    """A key or fingerprint the profile insists the board has."""

    fingerprint: str
    key: paramiko.PKey | None

    @classmethod
    def parse(cls, text: str) -> HostKeyPin:
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
        except (binascii.Error, paramiko.SSHException, UnknownKeyType, ValueError) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__  # paramiko's may be empty
            raise SshConfigError(
                f"host_key {brief(text)}: not a usable public key ({reason}); give the "
                "device's key as its .pub file has it ('ssh-ed25519 AAAA...', from "
                "/etc/ssh/ssh_host_ed25519_key.pub) or its fingerprint 'SHA256:...' "
                "(ssh-keygen -lf)",
                "host_key",
            ) from None
        return cls(fingerprint=key.fingerprint, key=key)


class VerifyHostKey(paramiko.MissingHostKeyPolicy):
    """Called for keys known_hosts lacks: accept only a pinned fingerprint, else refuse."""

    def __init__(self, hop: Hop, pin: HostKeyPin | None) -> None:
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
