"""Starting and stopping adb-emu as a child process (for tests and the pytest plugin)."""

from __future__ import annotations

import os
import selectors
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from harness.emulators.adb.properties import DEFAULT_PROPERTIES, DeviceProperties
from harness.errors import InfrastructureError
from harness.lifecycle.process import PIPE, STOP_GRACE, ManagedProcess

START_TIMEOUT = 15.0


class AdbEmulatorError(RuntimeError, InfrastructureError):
    """adb-emu did not start; the message carries the end of its log."""


@dataclass(frozen=True)
class AdbEndpoint:
    """Where a running adb-emu listens; ``serial`` is what ``adb connect`` names it."""

    host: str
    port: int

    @property
    def serial(self) -> str:
        return f"{self.host}:{self.port}"


class AdbEmulator:
    """adb-emu for one device root, as a context manager returning its :class:`AdbEndpoint`.

    ``kill()`` ends it abruptly (as a crashing device would); ``start()`` again brings it
    back on the same port, with the files of the device root kept.
    """

    def __init__(
        self,
        root: Path,
        *,
        properties: DeviceProperties = DEFAULT_PROPERTIES,
        host: str = "127.0.0.1",
        port: int = 0,
        adb_keys: Path | None = None,
        log_path: Path | None = None,
        verbose: bool = False,
    ) -> None:
        self.root = Path(root)
        self.properties = properties
        self.adb_keys = adb_keys
        self.log_path = log_path or self.root.parent / f"{self.root.name}.adb-emu.log"
        self.verbose = verbose
        self._host = host
        self._port = port
        self._process: ManagedProcess | None = None
        self._endpoint: AdbEndpoint | None = None

    @property
    def endpoint(self) -> AdbEndpoint:
        if self._endpoint is None:
            raise AdbEmulatorError("adb-emu has not been started")
        return self._endpoint

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def settings(self) -> dict[str, object]:
        """The adb transport field that reaches the device: ``connect`` (its serial)."""
        return {"connect": self.endpoint.serial}

    def start(self) -> dict[str, object]:
        """Start the daemon and wait until it listens; returns :attr:`settings`
        (:attr:`endpoint` says where it listens)."""
        if self.running:
            return self.settings
        argv = [
            sys.executable, "-m", "harness.emulators.adb.daemon",
            "--root", str(self.root), "--host", self._host, "--port", str(self._port),
            "--model", self.properties.model, "--device", self.properties.device,
            "--name", self.properties.name, "--abi", self.properties.abi,
            "--abilist", self.properties.abilist,
        ]  # fmt: skip
        for key, value in self.properties.extra.items():
            argv += ["--prop", f"{key}={value}"]
        if self.adb_keys is not None:
            argv += ["--adb-keys", str(self.adb_keys)]
        if self.verbose:
            argv.append("--verbose")
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = ManagedProcess(argv, name="adb-emu", stdout=PIPE, stderr=log)
        line = self._first_line(self._process)
        prefix = b"adb-emu listening on "
        if not line.startswith(prefix):
            self.kill()
            raise AdbEmulatorError(
                f"adb-emu for {self.root} did not start; log {self.log_path}:\n{self._log_tail()}"
            )
        host, _, port = line[len(prefix) :].decode().strip().rpartition(":")
        self._port = int(port)
        self._endpoint = AdbEndpoint(host, self._port)
        return self.settings

    def stop(self, timeout: float = STOP_GRACE) -> None:
        """Stop gracefully (SIGTERM: streams are closed, device processes killed)."""
        process, self._process = self._process, None
        if process is not None:
            process.stop(timeout)

    def kill(self) -> None:
        """End the daemon with SIGKILL, as a crash would; its device processes die too."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.stop()

    def __enter__(self) -> AdbEndpoint:
        self.start()
        return self.endpoint

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _first_line(self, process: ManagedProcess) -> bytes:
        stdout = process.popen.stdout
        assert stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        line = b""
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    break
                byte = os.read(stdout.fileno(), 1)
                if not byte:
                    break
                line += byte
        return line

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
