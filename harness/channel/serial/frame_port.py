"""Frames over a byte port: what :mod:`harness.channel.serial.arq` reads and writes.

A :class:`FramePort` waits on a pyserial port (``select()`` where it has a file
descriptor: a UART, ``socket://``; short blocking reads where not: ``rfc2217://``),
splits what arrives at the 0x00 delimiters and decodes the frames between them
(:mod:`harness.channel.serial.frame`); a failing port is :class:`TransportLost`. It keeps the
first bytes it read, the evidence when a device's first frame never comes.
"""

from __future__ import annotations

import logging
import select
from typing import Protocol

import serial

from harness.channel.serial.frame import Frame, FrameError, decode_frame
from harness.transport.base import TransportLost
from harness.transport.serial import POLL_INTERVAL

log = logging.getLogger(__name__)

_READ_CHUNK = 4096
_MAX_UNDELIMITED = 65536  # encoded bytes without a 0x00 before they are dropped as garbage
_KEPT_BYTES = 256  # the first bytes read, kept as evidence


class SerialPortLike(Protocol):
    """The part of a pyserial port the link uses."""

    timeout: float | None

    def read(self, size: int = 1) -> bytes: ...

    def write(self, data: bytes) -> int | None: ...

    @property
    def in_waiting(self) -> int: ...

    def close(self) -> None: ...


class FramePort:
    """Reads frames from and writes encoded frames to one port (not thread-safe)."""

    def __init__(self, port: SerialPortLike, *, name: str) -> None:
        self._port = port
        self._name = name
        self.closed = False
        self.received = 0  # bytes read so far
        self._first_bytes = bytearray()
        self._undelimited = bytearray()
        self._fileno = _selectable_fileno(port)
        if self._fileno is not None:
            port.timeout = 0  # reads return what has arrived; select() does the waiting
        elif port.timeout != POLL_INTERVAL:
            # Set once: setting it renegotiates an RFC 2217 port (~150 ms each time).
            port.timeout = POLL_INTERVAL

    @property
    def first_bytes(self) -> bytes:
        """The first bytes read (up to 256)."""
        return bytes(self._first_bytes)

    def read_frames(self, timeout: float) -> list[Frame | FrameError]:
        """The frames completed by what arrives within ``timeout`` (at most one wait), in
        order; a damaged one (or 64 KiB without a delimiter) as its :class:`FrameError`."""
        items: list[Frame | FrameError] = []
        data = self._read(timeout)
        while data:
            end = data.find(b"\0")
            if end < 0:
                self._undelimited += data
                if len(self._undelimited) > _MAX_UNDELIMITED:
                    self._undelimited.clear()
                    items.append(FrameError(f"{_MAX_UNDELIMITED} bytes without a delimiter"))
                break
            self._undelimited += data[:end]
            data = data[end + 1 :]
            if self._undelimited:
                encoded = bytes(self._undelimited)
                self._undelimited.clear()
                try:
                    items.append(decode_frame(encoded))
                except FrameError as exc:
                    log.debug("%s: dropped a bad frame: %s", self._name, exc)
                    items.append(exc)
        return items

    def write(self, data: bytes) -> None:
        """Write encoded frames; :class:`TransportLost` (and closed) if the port fails."""
        try:
            self._port.write(data)
        except (serial.SerialException, OSError, ValueError) as exc:
            self.close()
            raise TransportLost(
                f"{self._name}: the serial connection failed while writing: {exc}"
            ) from None

    def close(self) -> None:
        """Close the port; safe to call twice."""
        if not self.closed:
            self.closed = True
            try:
                self._port.close()
            except (serial.SerialException, OSError) as exc:
                log.debug("%s: closing the port failed: %s", self._name, exc)

    def _read(self, timeout: float) -> bytes:
        try:
            if self._fileno is not None:
                ready, _, _ = select.select([self._fileno], [], [], timeout)
                data = self._port.read(_READ_CHUNK) if ready else b""
            else:
                data = self._port.read(1)  # waits at most POLL_INTERVAL; the caller loops
                waiting = self._port.in_waiting if data else 0
                data = data + self._port.read(waiting) if waiting else data
        except (serial.SerialException, OSError, ValueError) as exc:
            self.close()
            raise TransportLost(
                f"{self._name}: the serial connection failed while reading: {exc}"
            ) from None
        self.received += len(data)
        if len(self._first_bytes) < _KEPT_BYTES:
            self._first_bytes += data[: _KEPT_BYTES - len(self._first_bytes)]
        return data


def _selectable_fileno(port: SerialPortLike) -> int | None:
    """The port's file descriptor if select() can wait on it, else None."""
    fileno = getattr(port, "fileno", None)
    if fileno is None:
        return None
    try:
        return int(fileno())
    except (AttributeError, OSError, ValueError, TypeError, serial.SerialException):
        return None
