"""A private adb server: its own port, key directory and log, so runs never collide.

The adb client starts a server on demand and shares it with everything on the machine
that uses the same port (5037 by default) and keeps its keys in ``$HOME/.android``.
:class:`PrivateAdbServer` gives a test its own of each. It runs the real server in
the foreground (``adb -P PORT server nodaemon``) as a child of the harness, rather
than letting a client fork it into the background, so that it is stopped with the
harness however the harness ends (:mod:`harness.lifecycle`). Its clients name the
server ``127.0.0.1`` (``-H``), never ``localhost``: the adb client forks a server only
for ``localhost``, so a client that finds the server gone fails instead of starting
one that would outlive the run; and the port stays in the owner's record, so a server
there is found by the janitor and the sweep whoever started it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType

from harness.emulators.adb.daemon import EMULATOR_SCAN_PORTS
from harness.errors import InfrastructureError
from harness.lifecycle import owner
from harness.lifecycle.process import STOP_GRACE, ManagedProcess, on_free_port
from harness.lifecycle.process import free_port as lifecycle_free_port
from harness.lifecycle.reap import adb_servers, end_processes
from harness.transport.adb import adb_server_answers

DEFAULT_SERVER_PORT = 5037


class AdbServerError(RuntimeError, InfrastructureError):
    """The adb client is missing or its server would not start."""


_RESERVED_PORTS = {DEFAULT_SERVER_PORT, *EMULATOR_SCAN_PORTS}
_START_TIMEOUT = 15.0
_BIND_ATTEMPTS = 5


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now, outside the adb-reserved ports."""
    return lifecycle_free_port("127.0.0.1", _RESERVED_PORTS)


class PrivateAdbServer:
    """An adb server on a port of its own, with ``home`` as HOME and TMPDIR."""

    def __init__(self, home: Path, *, port: int | None = None, adb: str | None = None) -> None:
        adb = adb or os.environ.get("ET_HARNESS_ADB") or "adb"  # the user's choice, see adb.py
        found = shutil.which(adb)
        if found is None:
            raise AdbServerError(f"{adb} not found: install the adb client (apt-get install adb)")
        self.adb_path = found
        self.home = Path(home)
        self._requested_port = port
        self.port = port or free_port()
        self._process: ManagedProcess | None = None

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
        """Run ``adb -H 127.0.0.1 -P PORT ARGS`` against this server (an address the client
        calls remote, so it never forks a server of its own there)."""
        return subprocess.run(
            [self.adb_path, "-H", "127.0.0.1", "-P", str(self.port), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            stdin=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int | None:
        """The server's PID while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the server and wait until it accepts connections; after a stop, on the
        port it had."""
        self.home.mkdir(parents=True, exist_ok=True)
        if self._requested_port is not None:
            started = self._launch(self._requested_port)
        else:
            started = on_free_port(
                self._launch, attempts=_BIND_ATTEMPTS, avoid=_RESERVED_PORTS
            ) is not None  # fmt: skip
        if not started:
            tail = self._process.stderr_tail() if self._process is not None else ""
            raise AdbServerError(f"adb server on port {self.port} did not start:\n{tail}")
        self._requested_port = self.port  # started again, it keeps the port clients know

    def _launch(self, port: int) -> bool:
        """True once the server on ``port`` accepts connections; False if it exited."""
        self.port = port
        if self._process is not None:
            self._process.stop()
        owner.current().add_adb_port(port)  # a server a client forks here is found too
        process = self._process = ManagedProcess(
            [self.adb_path, "-P", str(port), "server", "nodaemon"],
            name="adb server", env=self.env, log=self.home / "adb-server.log",
        )  # fmt: skip
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            # It answers once its event loop runs, after its keys are loaded (or made);
            # still running, it is not another server on the port.
            if adb_server_answers("127.0.0.1", port, 1.0) and process.poll() is None:
                return True
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(0.05)  # it exits if it cannot bind
                break
        process.stop()
        return False

    def stop(self) -> None:
        """Stop the server (it exits on SIGTERM); safe if it is not running."""
        if self._process is not None:
            self._process.stop()
            self._process = None
            end_processes(adb_servers({self.port}), STOP_GRACE)  # one a client forked

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
