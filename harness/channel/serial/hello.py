"""The HELLO frame (docs/serial-protocol.md): what a device announces about its link.

A device sends one when it boots (session 0) and one in answer to each HELLO_REQUEST
(echoing that request's session); :mod:`harness.channel.serial.arq` adapts its frame size
and window to it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from harness.data.messages import Action
from harness.transport.base import TransportError

LINK_VERSION = 1
CAP_EXIT = 0x100  # HELLO capabilities: bit n serves wire action n; this bit EXIT frames
_HELLO_FIXED = struct.Struct("<BBHHBBIII")


class SerialProtocolError(TransportError):
    """The device broke the serial protocol (e.g. sent a message shorter than a header)."""


@dataclass(frozen=True)
class DeviceHello:
    """What a device announces in its HELLO frame."""

    link_version: int
    wire_version: int
    rx_buffer: int  # bytes of the device's receive buffer
    max_frame: int  # largest decoded frame (header, payload and CRC) it accepts
    window: int  # DATA frames the host may have unacknowledged
    tx_window: int  # DATA frames the device sends before waiting for an ACK
    max_message: int  # largest wire-format request it accepts
    session: int  # the HELLO_REQUEST's session number it answers; 0 at boot
    capabilities: int
    firmware_version: str

    @classmethod
    def parse(cls, payload: bytes) -> DeviceHello:
        """Decode a HELLO frame's payload; :class:`SerialProtocolError` if malformed."""
        if len(payload) < _HELLO_FIXED.size + 1:
            raise SerialProtocolError(f"HELLO payload of {len(payload)} bytes is too short")
        fields = _HELLO_FIXED.unpack_from(payload)
        text_len = payload[_HELLO_FIXED.size]
        text = payload[_HELLO_FIXED.size + 1 :]
        if len(text) != text_len:
            raise SerialProtocolError(
                f"HELLO firmware version says {text_len} bytes, {len(text)} follow"
            )
        return cls(*fields, text.decode("utf-8", errors="replace"))  # type: ignore[call-arg]

    def serves(self, action: Action) -> bool:
        """True if the device announced that it serves ``action``. Bit 8 is EXIT frames,
        not REBOOT: REBOOT is announced in the HELLO report's ``capabilities`` fact only."""
        if action is Action.REBOOT:
            return False
        return bool(self.capabilities & (1 << int(action)))
