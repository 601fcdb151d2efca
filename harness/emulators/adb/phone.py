"""adb-emu as a device kind starts it: the daemon and the private adb server its clients
talk to, one emulated phone that stops, starts and restarts whole.

The server is part of the emulated phone: the harness started it, so a restart (after
either died) starts both again, the server on the port the profile's transport was
given. A server the user runs (a real phone's) is never started or stopped here.
"""

from __future__ import annotations

from pathlib import Path

from harness.emulators.adb.launcher import AdbEmulator
from harness.emulators.adb.server import PrivateAdbServer


class EmulatedPhone:
    """adb-emu with its private adb server, in ``home`` (an :class:`Emulator`)."""

    def __init__(self, home: Path) -> None:
        self.server = PrivateAdbServer(home / "adb-server")
        self.daemon = AdbEmulator(home / "device-root")

    @property
    def settings(self) -> dict[str, object]:
        """The adb transport fields that reach it: ``connect`` and ``server_port``."""
        return {**self.daemon.settings, "server_port": self.server.port}

    def start(self) -> dict[str, object]:
        """Start the server (on the port it had, after the first start) and the daemon."""
        self.server.start()
        try:
            self.daemon.start()
        except BaseException:
            self.server.stop()
            raise
        return self.settings

    def stop(self) -> None:
        """Stop the daemon and the server; safe to call twice."""
        try:
            self.daemon.stop()
        finally:
            self.server.stop()

    def kill(self) -> None:
        """End the daemon abruptly, as a crashing phone would (the host's server stays)."""
        self.daemon.kill()
