"""The serial transport: an MCU's port, opened from a profile's settings; its reset line.

A port is anything pyserial's ``serial_for_url`` opens: a device path
(``/dev/ttyACM0``), ``socket://127.0.0.1:PORT`` (QEMU's ``-serial tcp:...``) or
``rfc2217://host:port`` (a networked serial server such as ser2net, which a labgrid
exporter runs for a place's serial port; opened with ``?ign_set_control``, as ser2net
does not answer the control option pyserial otherwise waits for). The framed protocol on
top is :mod:`harness.channel.serial.arq`, reached through :mod:`harness.channel.serial.connect`.
Profile fields (``transport:`` with ``kind: serial``, checked by
:mod:`harness.devices.serial`)::

    port: /dev/ttyACM0          # or url: socket://127.0.0.1:4321
    baudrate: 115200
    rtscts: false               # hardware flow control
    xonxoff: false              # software flow control
    reset: none                 # none | dtr | rts: pulse this line to reset the board
    reset_pulse: 0.1            # seconds the reset line is held
    wait_boot: false            # require the boot HELLO (implied by a reset)
    boot_timeout: 5.0
    hello_timeout: 5.0
"""

from __future__ import annotations

import enum
import functools
import os
import socket
import time
from dataclasses import dataclass

import serial

from harness.transport.base import DeviceUnavailable

POLL_INTERVAL = 0.02  # s: longest read on a port select() cannot wait on (RFC 2217)


class ResetLine(enum.Enum):
    """The modem-control line wired to the board's reset, if any."""

    NONE = "none"
    DTR = "dtr"
    RTS = "rts"


@dataclass(frozen=True)
class SerialSettings:
    """Where a serial device is and how to talk to it."""

    url: str
    baudrate: int = 115200
    rtscts: bool = False
    xonxoff: bool = False
    reset: ResetLine = ResetLine.NONE
    reset_pulse: float = 0.1
    wait_boot: bool = False
    boot_timeout: float | None = None  # None: the link's (LinkConfig, 5 s)
    hello_timeout: float | None = None


@functools.cache
def _rfc2217_port_class() -> type[serial.SerialBase]:
    """pyserial's RFC 2217 client, without its pause after each control setting.

    ser2net never answers the control option, so the port is opened with
    ``ign_set_control``; pyserial then sleeps 0.1 s after each control setting instead
    (three at open: flow control, DTR, RTS), which made up a third of a lab place's
    hand-over. The setting is sent either way, in order on the one connection.
    """
    import serial.rfc2217

    class Rfc2217Port(serial.rfc2217.Serial):
        def rfc2217_set_control(self, value: bytes) -> None:
            self._rfc2217_options["control"].set(value)

    return Rfc2217Port


def open_port(config: SerialSettings) -> serial.SerialBase:
    """Open the port; :class:`DeviceUnavailable` if it cannot be opened."""
    network = config.url.startswith("rfc2217://")
    try:
        settings = {"baudrate": config.baudrate, "rtscts": config.rtscts, "xonxoff": config.xonxoff}
        if network:
            # set once at open: each later change renegotiates an RFC 2217 port (~150 ms)
            port = _rfc2217_port_class()(
                f"{config.url}?ign_set_control", timeout=POLL_INTERVAL, **settings
            )
        else:
            port = serial.serial_for_url(config.url, timeout=0, **settings)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise DeviceUnavailable(
            f"cannot open serial port {config.url}: {exc}; check the device is attached "
            "(or the emulator is listening) and that you may open it"
        ) from None
    if config.url.startswith("socket://"):
        _disable_nagle(port)
    return port


def _disable_nagle(port: serial.SerialBase) -> None:
    """TCP_NODELAY on a socket:// port: otherwise each small frame can wait ~40 ms for an ACK."""
    with socket.socket(fileno=os.dup(port.fileno())) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def pulse_reset(port: serial.SerialBase, config: SerialSettings) -> None:
    """Hold the configured reset line asserted for ``reset_pulse`` seconds, then release it."""
    if config.reset is ResetLine.NONE:
        return
    try:
        setattr(port, config.reset.value, True)
        time.sleep(config.reset_pulse)  # the board needs the line held: a hardware timing
        setattr(port, config.reset.value, False)
    except (serial.SerialException, OSError) as exc:
        raise DeviceUnavailable(
            f"cannot drive {config.reset.value.upper()} on {config.url} to reset the board: {exc}"
        ) from None
