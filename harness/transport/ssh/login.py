"""Logging in to one hop of an SSH route: its host key verified, then its credentials.

The host key is checked against the key pinned in the profile (the board's hop) or the
hop's known_hosts files before any credential is sent; known_hosts and identity files
are read bounded first (paramiko reads a file whole, and a profile may name any file).
Every failure is one line that says what to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import paramiko

from harness.transport.base import DeviceUnavailable
from harness.transport.ssh.hop import Hop
from harness.transport.ssh.host_keys import HostKeyPin, VerifyHostKey
from harness.transport.ssh.route import MAX_KEY_FILE_BYTES, MAX_KNOWN_HOSTS_BYTES
from harness.transport.ssh.setting_errors import HostKeyMismatch, HostKeyRejected, SshConfigError
from harness.transport.ssh.ssh_settings import SshSettings
from harness.untrusted.reading import InputFileError, read_bounded_text

__all__ = ["login", "reason"]


def login(hop: Hop, sock: Any, pin: HostKeyPin | None, settings: SshSettings) -> paramiko.SSHClient:
    """A client logged in to ``hop`` over ``sock`` (None: a direct connection), its host
    key checked against ``pin`` (the board's hop) or else the hop's known_hosts."""
    client = paramiko.SSHClient()
    _trust_host_keys(client, hop, pin)
    client.set_missing_host_key_policy(VerifyHostKey(hop, pin))
    identities = _identities(hop)
    try:
        _connect(client, hop, sock, pin, identities, settings)
    except BaseException:
        client.close()
        raise
    transport = client.get_transport()
    assert transport is not None
    transport.set_keepalive(settings.keepalive_interval)
    return client


def _trust_host_keys(client: paramiko.SSHClient, hop: Hop, pin: HostKeyPin | None) -> None:
    """The pinned key, or (no pin) the keys of the hop's known_hosts files, read bounded."""
    if pin is not None and pin.key is not None:
        client.get_host_keys().add(hop.known_hosts_name, pin.key.get_name(), pin.key)
        return
    if pin is not None:
        return  # a pinned fingerprint: checked by the policy
    for path in hop.known_hosts:
        if path.is_file():
            try:
                # Bounded first: paramiko reads the whole file, and a profile may
                # name any file here (/proc/self/pagemap: 256 GB of one line).
                read_bounded_text(path, MAX_KNOWN_HOSTS_BYTES)
                client.load_system_host_keys(str(path))
            except InputFileError as exc:
                raise SshConfigError(f"known_hosts {exc}", "known_hosts") from None
            except (OSError, paramiko.SSHException) as exc:
                raise SshConfigError(
                    f"known_hosts {path} is unreadable: {exc}", "known_hosts"
                ) from None


def _identities(hop: Hop) -> list[str]:
    """The hop's identity files that exist, each (and its -cert.pub) within its bound."""
    identities = [str(p) for p in hop.identity_files if p.is_file()]
    for identity in identities:  # paramiko reads a key file whole, and its -cert.pub
        for key_file in (Path(identity), Path(f"{identity}-cert.pub")):
            if key_file.is_file():
                try:
                    read_bounded_text(key_file, MAX_KEY_FILE_BYTES)
                except InputFileError as exc:
                    raise SshConfigError(f"identity file {exc}", "identity_file") from None
    return identities


def _connect(
    client: paramiko.SSHClient,
    hop: Hop,
    sock: Any,
    pin: HostKeyPin | None,
    identities: list[str],
    settings: SshSettings,
) -> None:
    """``client.connect`` to ``hop``; paramiko's failures as the harness's, in one line."""
    timeout = settings.connect_timeout
    try:
        client.connect(
            hop.hostname,
            hop.port,
            username=hop.user,
            key_filename=identities or None,  # type: ignore[arg-type]  # paramiko takes a list
            allow_agent=settings.use_agent,
            look_for_keys=not hop.identity_files,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            channel_timeout=timeout,
            sock=sock,
        )
    except HostKeyRejected:
        raise
    except paramiko.BadHostKeyException as exc:
        raise _mismatch(hop, exc, pin) from None
    except paramiko.AuthenticationException as exc:
        raise _authentication_failed(hop, identities, str(exc), settings) from None
    except TimeoutError:
        raise DeviceUnavailable(
            f"{hop}: no answer within {timeout:.0f} s: is the device on and reachable?"
        ) from None
    except (OSError, paramiko.SSHException, EOFError) as exc:
        if "No authentication methods available" in str(exc):  # paramiko had no key at all
            raise _authentication_failed(hop, identities, "no key to offer", settings) from None
        raise DeviceUnavailable(
            f"{hop}: cannot connect: {reason(exc)}. Is sshd running "
            "there and the address and port right?"
        ) from None


def _mismatch(
    hop: Hop, exc: paramiko.BadHostKeyException, pin: HostKeyPin | None
) -> HostKeyMismatch:
    source = "the profile's host_key" if pin else ", ".join(str(p) for p in hop.known_hosts)
    return HostKeyMismatch(
        f"{hop.known_hosts_name} offered host key {exc.key.get_name()} "
        f"{exc.key.fingerprint}, but {source} has {exc.expected_key.get_name()} "
        f"{exc.expected_key.fingerprint}. The device may have been re-imaged, or someone "
        "is intercepting the connection. If the new key is right, remove the old one "
        f"(ssh-keygen -R '{hop.known_hosts_name}' -f FILE) and pin the new one: "
        f'host_key: "{exc.key.get_name()} {exc.key.get_base64()}".'
    )


def _authentication_failed(
    hop: Hop, identities: list[str], why: str, settings: SshSettings
) -> DeviceUnavailable:
    tried = ", ".join(identities) or "no key files"
    agent = " and the ssh-agent" if settings.use_agent else ""
    return DeviceUnavailable(
        f"{hop}: authentication failed ({why}); tried {tried}{agent}. Add your public "
        f"key to ~{hop.user}/.ssh/authorized_keys on the device, or set identity_file "
        "(encrypted keys must be loaded into ssh-agent)."
    )


def reason(exc: BaseException) -> str:
    """What ``exc`` says, or what it means: a server that closes the connection after its
    banner (a killed sshd session) is paramiko's bare EOFError, or a reset when our next
    packet was already on its way."""
    if isinstance(exc, EOFError | ConnectionResetError):
        return f"the server closed the connection during the SSH handshake ({type(exc).__name__})"
    return str(exc) or type(exc).__name__
