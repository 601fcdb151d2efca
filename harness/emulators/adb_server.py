"""A private adb server: its own port, key directory and log, so runs never collide.

The adb client starts a server on demand and shares it with everything on the machine
that uses the same port (5037 by default) and keeps its keys in ``$HOME/.android``.
:class:`PrivateAdbServer` gives a test its own of each and kills the server at the end.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from types import TracebackType

from harness.emulators.adbd import EMULATOR_SCAN_PORTS

DEFAULT_SERVER_PORT = 5037


class AdbServerError(RuntimeError):
    """The adb client is missing or its server would not start."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now, outside the adb-reserved ports."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port != DEFAULT_SERVER_PORT and port not in EMULATOR_SCAN_PORTS:
            return port


class PrivateAdbServer:
    """An adb server on a port of its own, with ``home`` as HOME and TMPDIR."""

    def __init__(self, home: Path, *, port: int | None = None, adb: str = "adb") -> None:
        found = shutil.which(adb)
        if found is None:
            raise AdbServerError(f"{adb} not found: install the adb client (apt-get install adb)")
        self.adb_path = found
        self.home = Path(home)
        self.port = port or free_port()

    @property
    def env(self) -> dict[str, str]:
        """Environment for adb clients that talk to this server (and start it, if need be)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "ADB_"))}
        env.update(
            HOME=str(self.home),
            TMPDIR=str(self.home),
            ANDROID_ADB_SERVER_PORT=str(self.port),
        )
        return env

    @property
    def public_key(self) -> Path:
        """The host key this server signs AUTH tokens with (made at first start)."""
        return self.home / ".android" / "adbkey.pub"

    def adb(
        self, *args: str, timeout: float = 30.0, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run ``adb -P PORT ARGS`` against this server."""
        return subprocess.run(
            [self.adb_path, "-P", str(self.port), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            stdin=subprocess.DEVNULL,
        )

    def start(self) -> None:
        """Start the server (it forks into the background) and wait until it answers."""
        self.home.mkdir(parents=True, exist_ok=True)
        result = self.adb("start-server")
        if result.returncode != 0:
            raise AdbServerError(
                f"adb server on port {self.port} did not start: {result.stderr.strip()}"
            )

    def stop(self) -> None:
        """Kill the server; safe if it is not running."""
        self.adb("kill-server", timeout=15.0)

    def __enter__(self) -> PrivateAdbServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
