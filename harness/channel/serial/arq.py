"""Host side of the framed serial protocol (docs/serial-protocol.md): go-back-N ARQ.

A :class:`SerialLink` carries wire-format messages to a device over a byte port (a
pyserial port: a UART, ``socket://`` to QEMU, ``rfc2217://``; read and written as frames
by :mod:`.frame_port`) and brings its reports back; the device's HELLO (:mod:`.hello`)
sets its frame size and window. Frames are COBS-encoded and delimited by 0x00, protected
by a CRC-32 and numbered; DATA frames are acknowledged, lost ones resent (go-back-N
within the window the device announces), and a request whose report does not come is
resent after a resynchronisation; the device answers a resent request from its cache
instead of executing it twice.

Every failure ends in a :mod:`harness.transport.base` error within bounded
time; a report is returned only for the request whose sequence number it
echoes.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import struct
import time
from collections import deque
from collections.abc import Callable

from harness.channel.message_channel import (
    FIRMWARE_REBUILD,
    MessageChannel,
    header_seq,
    version_mismatch,
)
from harness.channel.serial.frame import (
    FLAG_END,
    FLAG_START,
    FRAME_CRC,
    FRAME_HEADER,
    Frame,
    FrameError,
    FrameKind,
)
from harness.channel.serial.frame_port import FramePort, SerialPortLike
from harness.channel.serial.hello import CAP_EXIT, LINK_VERSION, DeviceHello, SerialProtocolError
from harness.channel.serial.link_config import LinkConfig, LinkStats
from harness.channel.serial.round_trip import RetransmitTimer
from harness.codec import wire
from harness.errors import InfrastructureError, UsageError
from harness.transport.base import (
    DeviceUnavailable,
    TransportError,
    TransportLost,
    TransportTimeout,
)

log = logging.getLogger(__name__)

_U32 = struct.Struct("<I")
_DEFAULTS = LinkConfig()
_PROBE_TIMEOUT = 1.0  # s: a HELLO_REQUEST after a missing boot HELLO, to tell lost from dead


class BootHelloMissing(DeviceUnavailable):
    """The boot HELLO the link waited for did not come; ``received`` holds the first bytes
    the port gave meanwhile (evidence for the message)."""

    def __init__(self, message: str, received: bytes) -> None:
        super().__init__(message)
        self.received = received


class MessageTooLarge(ValueError, UsageError):
    """A message is larger than the device's announced ``max_message``."""


class _NoProgress(InfrastructureError):
    """This attempt at an exchange stalled; the link resynchronises and tries again."""


class SerialLink(MessageChannel):
    """Wire messages over a framed serial link to one device (an agent session's channel).

    Build it with :meth:`open`, which waits for the device's HELLO and adapts the
    frame size and window to what the device announces. One request at a time: a
    link is not thread-safe.
    """

    def __init__(self, port: SerialPortLike, config: LinkConfig = _DEFAULTS, *, name: str = "mcu"):
        self._config = config
        self._name = name
        self._session = secrets.randbits(32) or 1
        self._stats: dict[str, int] = {f.name: 0 for f in dataclasses.fields(LinkStats)}
        self._io = FramePort(port, name=name)
        self._hello: DeviceHello | None = None
        self._boot_hello: DeviceHello | None = None
        self._foreign_hello: DeviceHello | None = None
        self._handshake_done = False
        self._needs_resync = True
        self._tx_seq = 0
        self._rx_expected = 0
        self._nak_sent = False
        self._partial: bytearray | None = None
        self._rx_progress = 0
        self._messages: deque[bytes] = deque()
        self._acks: deque[Frame] = deque()
        self._ack_wait = RetransmitTimer(config.min_ack_timeout, config.ack_timeout)

    # ------------------------------------------------------------------ public API

    @classmethod
    def open(
        cls, port: SerialPortLike, config: LinkConfig = _DEFAULTS, *, name: str = "mcu"
    ) -> SerialLink:
        """A link on ``port`` after the HELLO handshake; closes the port if it fails."""
        link = cls(port, config, name=name)
        try:
            if config.wait_boot:
                link._wait_boot_hello()
            link._resync(DeviceUnavailable)
        except BaseException:
            link.close()
            raise
        return link

    @property
    def hello(self) -> DeviceHello:
        """What the device announced in the last handshake."""
        if self._hello is None:
            raise DeviceUnavailable(f"{self._name}: no HELLO from the device yet")
        return self._hello

    @property
    def boot_hello(self) -> DeviceHello | None:
        """The HELLO the device sent when it booted, if the link saw it."""
        return self._boot_hello

    def await_reboot(self) -> None:
        """After the device answered REBOOT: wait for its boot HELLO, then handshake anew.

        The device resets once its report is acknowledged, so the report's ACK is sent
        again while waiting (a lost one would keep it waiting); :class:`BootHelloMissing`
        if no boot HELLO comes within ``boot_timeout``.
        """
        self._check_open()
        self._hello = None
        self._handshake_done = False
        self._boot_hello = None
        self._session = secrets.randbits(32) or 1
        ack = Frame(FrameKind.ACK, self._rx_expected).encode()
        deadline = time.monotonic() + self._config.boot_timeout
        while self._boot_hello is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BootHelloMissing(
                    f"{self._name}: no boot HELLO within {self._config.boot_timeout:g} s "
                    "after the device answered REBOOT: it did not reset; power-cycle the "
                    "board, or give the profile a reset line (transport.reset)",
                    self._io.first_bytes,
                )
            self._write(ack)
            self._wait(
                min(self._config.ack_timeout, remaining), lambda: self._boot_hello is not None
            )
        self._resync(DeviceUnavailable)

    def stats(self) -> LinkStats:
        """Counters since the link was opened."""
        return LinkStats(**self._stats)

    def exit_device(self, code: int) -> None:
        """Ask the device to end itself with exit status ``code`` (QEMU: semihosting)."""
        self._check_open()
        if not self.hello.capabilities & CAP_EXIT:
            raise DeviceUnavailable(f"{self._name}: the device does not serve EXIT frames")
        self._write(b"\0" + Frame(FrameKind.EXIT, 0, 0, _U32.pack(code)).encode())

    def close(self) -> None:
        """Close the port; safe to call twice."""
        self._io.close()

    def __enter__(self) -> SerialLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ exchange

    def exchange(self, message: bytes, seq: int, what: str = "message") -> bytes:
        """Deliver ``message`` and return the bytes of the report that echoes ``seq``.

        A report that does not come is asked for again after a resynchronisation (the
        device answers a resent request from its cache); reports for other requests
        (stale ones, after a resend) are dropped.
        """
        self._check_open()
        if len(message) > self.hello.max_message:
            raise MessageTooLarge(
                f"{self._name}: the {what} #{seq} is {len(message)} bytes; the device "
                f"accepts at most {self.hello.max_message} (max_message in its HELLO): "
                "make the request smaller"
            )
        deadline = time.monotonic() + self._config.request_timeout
        problems: list[str] = []
        for attempt in range(1, self._config.attempts + 1):
            if time.monotonic() >= deadline:
                break
            if attempt > 1:
                self._count("request_retries")
                log.info(
                    "%s: resending %s #%d (attempt %d): %s",
                    self._name,
                    what,
                    seq,
                    attempt,
                    problems[-1],
                )
            try:
                if self._needs_resync:
                    self._resync(TransportTimeout)
                self._send_message(message, deadline)
                return self._await_report(seq, deadline)
            except _NoProgress as exc:
                self._needs_resync = True
                problems.append(str(exc))
        raise TransportTimeout(
            f"{self._name}: no report for {what} #{seq} within {self._config.request_timeout:g} s "
            f"({len(problems)} attempt(s): {'; '.join(problems) or 'out of time'}); "
            "check the device is running and the cable or emulator is connected"
        )

    def _send_message(self, message: bytes, deadline: float) -> None:
        """Deliver ``message`` as DATA frames; returns when the device has it all.

        That is when every frame is acknowledged, or when the report's first frame
        arrives: the device answers only a complete request, and frames of older
        reports cannot arrive in order (they were all received, or the handshake
        renumbered the link).
        """
        size = min(self._config.max_frame, self.hello.max_frame) - FRAME_HEADER - FRAME_CRC
        window = max(1, min(self._config.window, self.hello.window))
        segments = [message[i : i + size] for i in range(0, len(message), size)] or [b""]
        count = len(segments)
        sent_at = [0.0] * count
        resent = [False] * count
        seq0 = self._tx_seq
        base = sent = 0
        stalls = 0
        answered_at = self._rx_progress
        self._acks.clear()
        while base < count and self._rx_progress == answered_at:
            while sent < count and sent - base < window:
                flags = (FLAG_START if sent == 0 else 0) | (FLAG_END if sent == count - 1 else 0)
                resent[sent] = sent_at[sent] > 0.0
                sent_at[sent] = time.monotonic()
                self._write(Frame(FrameKind.DATA, seq0 + sent, flags, segments[sent]).encode())
                sent += 1
                self._stats["max_in_flight"] = max(self._stats["max_in_flight"], sent - base)
            self._wait(
                min(self._ack_wait.timeout, deadline - time.monotonic()),
                lambda: bool(self._acks) or self._rx_progress != answered_at,
            )
            if self._rx_progress != answered_at:
                break
            if not self._acks:
                stalls += 1
                if stalls > self._config.max_retries or time.monotonic() >= deadline:
                    raise _NoProgress(
                        f"frame {base + 1} of {count} not acknowledged after {stalls} resends"
                    )
                self._ack_wait.back_off()
                self._count("resent_frames", sent - base)
                sent = base
                continue
            while self._acks:
                ack = self._acks.popleft()
                acked = (ack.seq - (seq0 + base)) & 0xFF
                if acked > sent - base:
                    continue  # acknowledges nothing outstanding: an old ACK
                if acked:
                    base += acked
                    stalls = 0
                    if not resent[base - 1]:  # Karn: only frames sent once give a sample
                        self._ack_wait.sample(time.monotonic() - sent_at[base - 1])
                if ack.kind == FrameKind.NAK and base < sent:
                    stalls += 1
                    if stalls > self._config.max_retries:
                        raise _NoProgress(f"frame {base + 1} of {count} refused {stalls} times")
                    self._count("resent_frames", sent - base)
                    sent = base
        self._tx_seq = (seq0 + count) & 0xFF

    def _await_report(self, seq: int, deadline: float) -> bytes:
        polls = 0
        while True:
            while self._messages:
                message = self._messages.popleft()
                if len(message) < wire.HEADER_SIZE:
                    raise SerialProtocolError(
                        f"{self._name}: the device sent a {len(message)}-byte message, shorter "
                        "than a report's header; the firmware's encoder or the link is broken"
                    )
                if header_seq(message) == seq:
                    return message
                self._count("stale_reports")
                log.warning(
                    "%s: dropped a report for #%d while waiting for #%d",
                    self._name,
                    header_seq(message),
                    seq,
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _NoProgress(f"report for #{seq} not complete in time")
            progress = self._rx_progress
            self._wait(min(self._ack_wait.timeout, remaining), lambda: bool(self._messages))
            if self._messages or self._rx_progress != progress:
                polls = 0
                continue
            polls += 1
            if polls > self._config.max_retries:
                raise _NoProgress(f"no report frames after {polls - 1} polls")
            self._ack_wait.back_off()
            self._count("polls")
            self._write(Frame(FrameKind.NAK, self._rx_expected).encode())

    # ------------------------------------------------------------------ handshake

    def _wait_boot_hello(self) -> None:
        """Wait for the boot HELLO; :class:`BootHelloMissing`, with what was read, if it
        does not come (a HELLO_REQUEST then tells a device that runs from one that does not)."""
        self._wait(self._config.boot_timeout, lambda: self._boot_hello is not None)
        if self._boot_hello is not None:
            return
        received = self._io.first_bytes  # before the probe adds its answer
        evidence = (
            f"{self._io.received} byte(s) read, {self._stats['bad_frames']} damaged frame(s)"
            + (f", first: {received.hex(' ')}" if received else "")
        )
        try:
            self._resync(DeviceUnavailable, timeout=_PROBE_TIMEOUT)
            verdict = (
                "yet it answered a HELLO_REQUEST: it runs, but its boot HELLO was lost "
                "(sent before the port was open?) or it did not restart"
            )
        except TransportError as exc:
            verdict = f"nor did it answer a HELLO_REQUEST within {_PROBE_TIMEOUT:g} s ({exc})"
        raise BootHelloMissing(
            f"{self._name}: no boot HELLO within {self._config.boot_timeout:g} s ({evidence}); "
            f"{verdict}; check the port, the baud rate and that the firmware starts "
            "(reset the board)",
            received,
        )

    def _resync(self, error: type[TransportError], timeout: float | None = None) -> None:
        """HELLO handshake: both sides restart their frame numbering."""
        self._count("resyncs")
        self._handshake_done = False
        request = b"\0" + Frame(FrameKind.HELLO_REQUEST, 0, 0, _U32.pack(self._session)).encode()
        timeout = self._config.hello_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not self._handshake_done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise error(
                    f"{self._name}: no HELLO answered the handshake within {timeout:g} s; "
                    "check the port, the baud rate and that the firmware is running"
                )
            self._write(request)
            self._wait(min(self._config.hello_interval, remaining), lambda: self._handshake_done)
        hello = self.hello
        if hello.link_version != LINK_VERSION:
            raise DeviceUnavailable(
                f"{self._name}: the device speaks serial link version {hello.link_version}, "
                f"this harness version {LINK_VERSION}: update the firmware or the harness"
            )
        if hello.wire_version != wire.WIRE_VERSION:
            raise DeviceUnavailable(
                version_mismatch(self._name, "firmware", hello.wire_version, FIRMWARE_REBUILD)
            )
        self._needs_resync = False

    def _on_hello(self, hello: DeviceHello) -> None:
        if hello.session == self._session:
            # Everything the device sent before this HELLO belongs to the old numbering.
            self._hello = hello
            self._handshake_done = True
            self._tx_seq = 0
            self._rx_expected = 0
            self._nak_sent = False
            self._partial = None
            self._messages.clear()
            self._acks.clear()
        elif hello.session == 0 and not self._handshake_done and self._hello is None:
            self._boot_hello = hello
        else:
            self._foreign_hello = hello

    # ------------------------------------------------------------------ frames in

    def _on_frame(self, frame: Frame) -> None:
        self._count("frames_received")
        if frame.kind == FrameKind.DATA:
            self._on_data(frame)
        elif frame.kind in (FrameKind.ACK, FrameKind.NAK):
            self._acks.append(frame)
        elif frame.kind == FrameKind.HELLO:
            self._on_hello(DeviceHello.parse(frame.payload))
        else:
            self._count("bad_frames")

    def _on_bad_frame(self) -> None:
        """A damaged frame may have been the DATA frame expected next: ask for it at once.

        Unlike the device, the host NAKs every damaged frame (a resent frame may be
        damaged again); the frames that follow a gap are not NAKed again.
        """
        self._count("bad_frames")
        self._nak_sent = True
        self._count("naks_sent")
        self._write(Frame(FrameKind.NAK, self._rx_expected).encode())

    def _on_data(self, frame: Frame) -> None:
        ahead = (frame.seq - self._rx_expected) & 0xFF
        if ahead:
            if ahead >= 128:
                self._count("duplicates")
                self._write(Frame(FrameKind.ACK, self._rx_expected).encode())
            elif not self._nak_sent:
                self._nak_sent = True
                self._count("naks_sent")
                self._write(Frame(FrameKind.NAK, self._rx_expected).encode())
            return
        self._rx_expected = (self._rx_expected + 1) & 0xFF
        self._nak_sent = False
        self._rx_progress += 1
        if frame.flags & FLAG_START:
            self._partial = bytearray()
        if self._partial is not None:
            self._partial += frame.payload
            if frame.flags & FLAG_END:
                self._messages.append(bytes(self._partial))
                self._partial = None
        self._write(Frame(FrameKind.ACK, self._rx_expected).encode())

    # ------------------------------------------------------------------ bytes

    def _wait(self, timeout: float, done: Callable[[], bool]) -> None:
        """Handle incoming frames until ``done()`` or ``timeout`` seconds pass."""
        deadline = time.monotonic() + max(0.0, timeout)
        while not done():
            if self._foreign_hello is not None:
                hello, self._foreign_hello = self._foreign_hello, None
                self._needs_resync = True
                raise TransportLost(
                    f"{self._name}: the device restarted or another host took it over "
                    f"(HELLO for session {hello.session}, firmware {hello.firmware_version}); "
                    "the outcome of the current request is unknown"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for item in self._io.read_frames(remaining):
                if isinstance(item, FrameError):
                    self._on_bad_frame()
                else:
                    self._on_frame(item)

    def _write(self, data: bytes) -> None:
        self._io.write(data)
        self._count("frames_sent")

    def _check_open(self) -> None:
        if self._io.closed:
            raise TransportLost(f"{self._name}: the serial link is closed; open a new one")

    def _count(self, name: str, amount: int = 1) -> None:
        self._stats[name] += amount
