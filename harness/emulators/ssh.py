"""ssh-emu: an emulated Linux board served by the real OpenSSH server.

A private ``/usr/sbin/sshd`` runs as root with its own host key, config and log,
logs clients in as an unprivileged device user, and by default lives in a network
namespace of its own: it listens on 127.0.0.1 *inside* that namespace and is
reached through an ssh ``ProxyCommand`` (``ip netns exec NS socat ...``), so the
board has no network path to the host and the host none to it except that
channel. Where namespaces cannot be made the daemon listens on the host's
127.0.0.1 instead (:attr:`Isolation.AUTO` falls back, :attr:`Isolation.NETNS`
refuses). See docs/ssh-emu.md.

Needs root (it creates a user and runs sshd), openssh-server, iproute2 and socat.
"""

from __future__ import annotations

import contextlib
import enum
import os
import pwd
import secrets
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from harness.errors import InfrastructureError
from harness.lifecycle import owner
from harness.lifecycle.process import ManagedProcess, free_port
from harness.lifecycle.reap import descendants
from harness.transport.ssh import SshSettings, fingerprint_of_public_key

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")
DEVICE_USER = "etdevice"
DEFAULT_ALIAS = "ssh-emu"
LISTEN_HOST = "127.0.0.1"
_BIND_ATTEMPTS = 5
_DAEMON_TOOLS = {SSHD: "openssh-server", "ssh-keygen": "openssh-client", "useradd": "passwd"}
_NETNS_TOOLS = {"ip": "iproute2", "socat": "socat"}
_LOG_KEEP_LINES = 10_000  # what log_count and wait_for_log can see


class SshEmulatorError(RuntimeError, InfrastructureError):
    """The emulated board could not be set up, started or stopped."""


class Isolation(enum.Enum):
    """Where the board's sshd listens."""

    NETNS = "netns"  # 127.0.0.1 inside a network namespace of its own
    LOOPBACK = "loopback"  # the host's 127.0.0.1
    AUTO = "auto"  # NETNS where namespaces can be made, else LOOPBACK


class NetworkNamespace:
    """A network namespace with only its loopback interface up; deleted on exit.

    Deleting it kills every process still inside, so nothing it held outlives it.
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name or f"et-ssh-{secrets.token_hex(4)}"
        self._created = False

    def create(self) -> None:
        """Add the namespace and bring its ``lo`` up."""
        owner.current().add_netns(self.name)  # first, so a kill right after leaves nothing
        try:
            _run_checked(["ip", "netns", "add", self.name], "create network namespace")
        except SshEmulatorError:
            owner.current().remove_netns(self.name)
            raise
        self._created = True
        try:
            _run_checked(["ip", "-n", self.name, "link", "set", "lo", "up"], "bring up lo")
        except SshEmulatorError:
            self.delete()
            raise

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def pids(self) -> list[int]:
        """Processes currently inside the namespace."""
        done = subprocess.run(
            ["ip", "netns", "pids", self.name], capture_output=True, text=True, check=False
        )
        return [int(p) for p in done.stdout.split()]

    def delete(self) -> None:
        """Kill what is left inside and remove the namespace; safe to call twice."""
        if not self._created:
            return
        _kill_all(self.pids())
        _run_checked(["ip", "netns", "del", self.name], "delete network namespace")
        self._created = False
        owner.current().remove_netns(self.name)

    def __enter__(self) -> NetworkNamespace:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


class SshBoardFiles:
    """What an emulated board reached over SSH keeps in its ``directory`` (ssh-emu and
    linux-emu): its host key, the harness's client key, and the known_hosts and ssh_config
    the ssh transport reads; stable names, so people can find them."""

    directory: Path
    alias: str
    user: str
    host: str
    port: int

    @property
    def host_key(self) -> Path:
        return self.directory / "ssh_host_ed25519_key"

    @property
    def client_key(self) -> Path:
        return self.directory / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.directory / "ssh_config"

    @property
    def host_public_key(self) -> str:
        """``ssh-ed25519 AAAA...``: pin this in a profile's ``host_key``."""
        kind, blob = self.host_key.with_suffix(".pub").read_text().split()[:2]
        return f"{kind} {blob}"

    @property
    def known_hosts_name(self) -> str:
        """How ssh names this endpoint in known_hosts: ``[127.0.0.1]:PORT``."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def write_client_files(self, proxy_command: str | None = None) -> None:
        """The known_hosts pinning this board's host key, and the ssh_config entry
        (``Host ALIAS``) that reaches it with the client key, strictly checked."""
        write_private(self.known_hosts, f"{self.known_hosts_name} {self.host_public_key}\n")
        lines = [
            f"Host {self.alias}",
            f"    HostName {self.host}",
            f"    Port {self.port}",
            f"    User {self.user}",
            f'    IdentityFile "{self.client_key}"',
            "    IdentitiesOnly yes",
            f'    UserKnownHostsFile "{self.known_hosts}"',
            "    StrictHostKeyChecking yes",
        ]
        if proxy_command:
            lines.append(f"    ProxyCommand {proxy_command}")
        write_private(self.ssh_config, "\n".join(lines) + "\n")


class SshEmulator(SshBoardFiles):
    """One emulated board: a real sshd, its keys, and client files to reach it.

    After :meth:`start`, ``directory`` holds ``ssh_config`` (host ``alias``),
    ``known_hosts``, the client key ``id_ed25519`` and ``sshd.log``: ``ssh -F
    DIR/ssh_config ALIAS`` logs in. The host key is kept across restarts in the
    same directory. Several emulators may share one ``netns`` (give each a port).
    """

    def __init__(
        self,
        directory: Path,
        *,
        user: str = DEVICE_USER,
        alias: str = DEFAULT_ALIAS,
        isolation: Isolation = Isolation.AUTO,
        netns: NetworkNamespace | None = None,
        port: int | None = None,
        start_timeout: float = 10.0,
        listen_host: str = LISTEN_HOST,  # e.g. 127.0.0.2, a lab exporter's address
    ) -> None:
        self.directory = directory.resolve()
        self.user = user
        self.alias = alias
        self.host = listen_host
        self._isolation = isolation
        self._shared_netns = netns
        self._requested_port = port
        self._start_timeout = start_timeout
        self._token = secrets.token_hex(4)
        self._netns: NetworkNamespace | None = None
        self._owns_netns = False
        self._process: ManagedProcess | None = None
        self._authorized_keys: Path | None = None
        self.port = 0

    @property
    def log_path(self) -> Path:
        return self.directory / "sshd.log"

    @property
    def host_key_fingerprint(self) -> str:
        """``SHA256:...`` of the host key, as ``ssh-keygen -l`` shows it."""
        return fingerprint_of_public_key(self.host_public_key)

    @property
    def proxy_command(self) -> str | None:
        """The ProxyCommand that reaches the daemon, or None on plain loopback."""
        if self._netns is None:
            return None
        # -t 0: end as soon as one side closes (socat's default lingers 0.5 s), so a
        # dead board reads as a closed connection at once. nodelay: with Nagle on,
        # every command waits ~40 ms for a delayed ACK.
        address = f"TCP:{self.host}:{self.port},nodelay"
        argv = self._netns.command(["socat", "-t", "0", "STDIO", address])
        return " ".join(argv)

    @property
    def authorized_keys_file(self) -> Path | None:
        """This board's authorized_keys, in the device user's ~/.ssh while it runs."""
        return self._authorized_keys

    @property
    def netns(self) -> NetworkNamespace | None:
        """The namespace the daemon lives in, if any."""
        return self._netns

    def profile(self, **overrides: Any) -> SshSettings:
        """An :class:`SshSettings` that reaches this board through its ``ssh_config``."""
        fields: dict[str, Any] = {"host": self.alias, "ssh_config": self.ssh_config}
        fields.update(overrides)
        return SshSettings(**fields)

    @property
    def settings(self) -> dict[str, object]:
        """The ssh transport fields that reach this board (through its ``ssh_config``)."""
        return {"host": self.alias, "ssh_config": str(self.ssh_config)}

    def start(self) -> dict[str, object]:
        """Set up user, keys and namespace, start sshd and wait until it listens;
        returns :attr:`settings`."""
        if self._process is not None:
            raise SshEmulatorError("ssh-emu is already running")
        _require_root_and(_DAEMON_TOOLS)
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            _ensure_privsep_dir()
            home = _ensure_user(self.user)
            ensure_key(self.host_key, "ssh-emu host key")
            ensure_key(self.client_key, "ssh-emu client key")
            self._authorized_keys = _install_authorized_key(
                home, self.user, self._token, self.client_key.with_suffix(".pub").read_text()
            )
            self._netns = self._choose_netns()
            self._spawn_listening_daemon()
            self.write_client_files(self.proxy_command)
        except BaseException:
            self.stop()
            raise
        return self.settings

    def pids(self) -> list[int]:
        """The listening daemon first, then every process of the sessions it serves."""
        if self._process is None or self._process.poll() is not None:
            return []
        return [self._process.pid, *sorted(descendants({self._process.pid}))]

    def kill(self) -> None:
        """SIGKILL the daemon and every session it serves, as a crash or power cut would."""
        if self._process is None:
            return
        _kill_all(self.pids())
        self._process.kill()

    def stop(self) -> None:
        """Kill everything the board runs and remove what :meth:`start` added outside
        ``directory`` (namespace, authorized key); safe to call twice."""
        self.kill()
        if self._process is not None:
            self._process.stop()
            self._process = None
        if self._netns is not None and self._owns_netns:
            self._netns.delete()
        self._netns = None
        if self._authorized_keys is not None:
            self._authorized_keys.unlink(missing_ok=True)
            owner.current().remove_path(self._authorized_keys)
            self._authorized_keys = None

    def wait(self) -> int:
        """Block until the daemon exits; its exit code."""
        if self._process is None:
            raise SshEmulatorError("ssh-emu is not running")
        return self._process.wait()

    def log_tail(self) -> str:
        """The last lines sshd logged (connections, errors)."""
        return self._process.stderr_tail() if self._process else ""

    def log_count(self, text: str) -> int:
        """How many lines sshd has logged so far that contain ``text``."""
        return self._process.stderr_count(text) if self._process else 0

    def wait_for_log(self, text: str, count: int = 1, timeout: float = 5.0) -> bool:
        """Whether sshd logged ``count`` lines containing ``text`` within ``timeout``
        (e.g. ``"Connection closed by"`` once a client has gone)."""
        return self._process is not None and self._process.wait_for_stderr(text, count, timeout)

    def __enter__(self) -> SshEmulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _choose_netns(self) -> NetworkNamespace | None:
        if self._shared_netns is not None:
            _require_root_and(_NETNS_TOOLS)
            return self._shared_netns
        if self._isolation is Isolation.LOOPBACK:
            return None
        if self._isolation is Isolation.AUTO and _missing(_NETNS_TOOLS):
            return None
        _require_root_and(_NETNS_TOOLS)
        netns = NetworkNamespace()
        try:
            netns.create()
        except SshEmulatorError:
            if self._isolation is Isolation.NETNS:
                raise
            return None
        self._owns_netns = True
        return netns

    def _spawn_listening_daemon(self) -> None:
        for _ in range(_BIND_ATTEMPTS):
            self.port = self._requested_port or self._pick_port()
            self._write_sshd_config()
            argv = [SSHD, "-D", "-e", "-f", str(self.directory / "sshd_config")]
            if self._netns is not None:
                argv = self._netns.command(argv)
            self._process = ManagedProcess(
                argv, name="sshd", log=self.log_path, keep_lines=_LOG_KEEP_LINES
            )
            listening = f"Server listening on {self.host} port {self.port}."
            if self._process.wait_for_stderr(listening, 1, self._start_timeout):
                return
            self.kill()
            self._process.stop()  # kept for its log tail
            bind_race = "Address already in use" in self._process.stderr_tail()
            if not (bind_race and self._requested_port is None):
                break
        raise SshEmulatorError(
            f"sshd did not start listening on {self.host}:{self.port} within "
            f"{self._start_timeout:.0f} s; its log ({self.log_path}) ends with:\n"
            f"{self.log_tail() or '(nothing)'}"
        )

    def _pick_port(self) -> int:
        if self._netns is not None:
            return 22  # the namespace is ours alone
        return free_port(self.host)

    def _write_sshd_config(self) -> None:
        assert self._authorized_keys is not None
        lines = [
            f"Port {self.port}",
            f"ListenAddress {self.host}",
            "AddressFamily inet",
            f"HostKey {self.host_key}",
            f"PidFile {self.directory / 'sshd.pid'}",
            # Relative to the device user's home: sshd reads it as that user.
            f"AuthorizedKeysFile .ssh/{self._authorized_keys.name}",
            f"AllowUsers {self.user}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "MaxSessions 100",
            "Subsystem sftp internal-sftp",
            "LogLevel VERBOSE",
        ]
        write_private(self.directory / "sshd_config", "\n".join(lines) + "\n")


def _missing(tools: dict[str, str]) -> list[str]:
    return [package for tool, package in tools.items() if not shutil.which(tool)]


def _require_root_and(tools: dict[str, str]) -> None:
    if os.geteuid() != 0:
        raise SshEmulatorError("ssh-emu needs root: it creates the device user and runs sshd")
    missing = _missing(tools)
    if missing:
        raise SshEmulatorError(
            f"ssh-emu needs: apt-get install -y {' '.join(sorted(set(missing)))}"
        )


def _ensure_privsep_dir() -> None:
    """sshd refuses to start without its privilege separation directory."""
    PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)


def _ensure_user(name: str) -> Path:
    """Create the device user (plain /bin/sh, unlocked for key logins); its home."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        done = subprocess.run(
            ["useradd", "-m", "-s", "/bin/sh", name], capture_output=True, text=True, check=False
        )
        if done.returncode not in (0, 9):  # 9: another emulator created it meanwhile
            raise SshEmulatorError(f"useradd {name} failed: {done.stderr.strip()}") from None
        # sshd with UsePAM no refuses accounts whose password is locked ("!").
        _run_checked(["usermod", "-p", "*", name], f"unlock user {name}")
        entry = pwd.getpwnam(name)
    home = Path(entry.pw_dir)
    ssh_dir = home / ".ssh"
    for directory in (home, ssh_dir):
        if not directory.is_dir():
            directory.mkdir(mode=0o700, parents=True)
            os.chown(directory, entry.pw_uid, entry.pw_gid)
    return home


def _install_authorized_key(home: Path, user: str, token: str, public_key: str) -> Path:
    """A per-emulator authorized_keys file in the user's ~/.ssh (sshd reads it as the user)."""
    entry = pwd.getpwnam(user)
    path = home / ".ssh" / f"authorized_keys.et-{token}"
    owner.current().add_path(path)
    write_private(path, public_key)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def ensure_key(path: Path, comment: str) -> None:
    if path.is_file() and path.with_suffix(".pub").is_file():
        return
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    _run_checked(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        f"generate {path}",
    )


def write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _run_checked(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SshEmulatorError(f"cannot {what}: `{' '.join(argv)}` said: {done.stderr.strip()}")


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
