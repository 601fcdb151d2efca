"""A lab place's serial console, read while its board boots after a power cycle: a board
that does not come back is quarantined with what its console printed (the place's
``NetworkSerialPort``: ser2net's RFC 2217 port, or a raw TCP one), as the failing test's
artifact (:attr:`harness.errors.InfrastructureError.kept`)."""

from __future__ import annotations

import threading
from types import TracebackType

from harness.devices.acquired_place import SerialAddress

_KEPT_BYTES = 1 << 20  # the most of a console kept (its end)
_READ_TIMEOUT_S = 0.2  # one read's wait: how soon the reader sees it is to stop


class ConsoleCapture:
    """What ``console`` prints while the block runs (its last :data:`_KEPT_BYTES`); a
    console that cannot be opened leaves :attr:`text` saying why, never fails the block."""

    def __init__(self, console: SerialAddress) -> None:
        self._console = console
        self._read = bytearray()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.problem = ""

    def __enter__(self) -> ConsoleCapture:
        import serial  # pyserial: the serial transport's, loaded when a lab board is cycled

        url = self._console.url + (
            "?ign_set_control" if self._console.protocol == "rfc2217" else ""
        )
        try:
            port = serial.serial_for_url(url, timeout=_READ_TIMEOUT_S)
        except (OSError, serial.SerialException) as exc:
            self.problem = f"its console {self._console.url} could not be opened: {exc}"
            return self
        self._thread = threading.Thread(
            target=self._reading, args=(port,), daemon=True, name="lab-console"
        )
        self._thread.start()
        return self

    def _reading(self, port: object) -> None:
        import serial

        try:
            while not self._stop.is_set():
                data = port.read(4096)  # type: ignore[attr-defined]
                self._read += data
                del self._read[:-_KEPT_BYTES]
        except (OSError, serial.SerialException) as exc:
            self.problem = f"its console {self._console.url} was lost: {exc}"
        finally:
            port.close()  # type: ignore[attr-defined]

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5 * _READ_TIMEOUT_S)

    @property
    def name(self) -> str:
        """What the kept copy is named after: ``URL/console.log``."""
        return f"{self._console.url}/console.log"

    @property
    def text(self) -> bytes:
        """What the console printed, or why there is nothing."""
        return bytes(self._read) if self._read or not self.problem else self.problem.encode()
