"""The boot HELLO against a scripted board on a loopback socket (no emulator): read when the
board boots once the port is open, and a missing one explained by what the link saw."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from harness.channel.serial.arq import BootHelloMissing
from harness.channel.serial.connect import connect
from harness.channel.serial.frame import Frame, FrameKind, decode_frame
from harness.channel.serial.hello import CAP_EXIT
from harness.codec import wire
from harness.transport.base import DeviceUnavailable
from harness.transport.serial import SerialSettings

NOISE = b"\x13\x37noise\x00"


def _hello(session: int, wire_version: int = wire.WIRE_VERSION) -> bytes:
    version = b"0.1.0+fake"
    fixed = struct.pack(
        "<BBHHBBIII", 1, wire_version, 1024, 135, 3, 4, 4096, session, 0xFE | CAP_EXIT
    )
    return Frame(FrameKind.HELLO, 0, 0, fixed + bytes([len(version)]) + version).encode()


class ScriptedBoard:
    """One client at a time on 127.0.0.1; :meth:`boot` sends ``boot_bytes``; a HELLO_REQUEST
    is answered with a HELLO for its session if ``answers``."""

    def __init__(
        self,
        boot_bytes: bytes,
        *,
        answers: bool = True,
        boot_at_accept: bool = False,
        wire_version: int = wire.WIRE_VERSION,
    ):
        self.boot_bytes = boot_bytes
        self.wire_version = wire_version
        self.answers = answers
        self.boot_at_accept = boot_at_accept
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.server.getsockname()[1]}"
        self._conn: socket.socket | None = None
        self._accepted = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def boot(self) -> None:
        assert self._accepted.wait(5.0), "the link never connected"
        assert self._conn is not None
        self._conn.sendall(self.boot_bytes)

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn:
            self._conn = conn
            self._accepted.set()
            if self.boot_at_accept:
                self.boot()
            pending = b""
            while data := conn.recv(4096):
                pending += data
                while b"\0" in pending:
                    encoded, _, pending = pending.partition(b"\0")
                    if not encoded:
                        continue
                    frame = decode_frame(encoded)
                    if frame.kind == FrameKind.HELLO_REQUEST and self.answers:
                        conn.sendall(
                            _hello(struct.unpack("<I", frame.payload)[0], self.wire_version)
                        )

    def close(self) -> None:
        self.server.close()
        if self._conn is not None:
            self._conn.close()
        self._thread.join(5.0)


@pytest.fixture
def board_factory() -> Iterator[type[ScriptedBoard]]:
    boards: list[ScriptedBoard] = []

    def make(*args: object, **kwargs: object) -> ScriptedBoard:
        boards.append(ScriptedBoard(*args, **kwargs))  # type: ignore[arg-type]
        return boards[-1]

    yield make  # type: ignore[misc]
    for board in boards:
        board.close()


def _config(board: ScriptedBoard) -> SerialSettings:
    return SerialSettings(url=board.url, wait_boot=True, boot_timeout=1.0, hello_timeout=2.0)


def test_a_board_that_boots_once_the_port_is_open_has_its_boot_hello_read(
    board_factory, late_port_open: None
) -> None:
    board = board_factory(b"\0" + _hello(0))
    with connect(_config(board), on_open=board.boot) as link:
        assert link.boot_hello is not None and link.boot_hello.session == 0
        assert link.hello.session not in (0, link.boot_hello.session)


def test_a_boot_hello_sent_before_the_port_opened_is_lost_and_the_error_says_so(
    board_factory, late_port_open: None
) -> None:
    """What QEMU with ``wait=on`` alone did now and then: the board booted on the connection,
    and pyserial's open discarded its boot HELLO."""
    board = board_factory(b"\0" + _hello(0), boot_at_accept=True)
    lost = r"0 byte\(s\) read.*answered a HELLO_REQUEST"
    with pytest.raises(BootHelloMissing, match=lost) as err:
        connect(_config(board))
    assert err.value.received == b""


def test_a_board_that_sends_noise_and_never_answers_is_dead_within_bounded_time(
    board_factory,
) -> None:
    board = board_factory(NOISE, answers=False)
    start = time.monotonic()
    with pytest.raises(BootHelloMissing, match=r"1 damaged frame.*nor did it answer") as err:
        connect(_config(board), on_open=board.boot)
    assert time.monotonic() - start < 1.0 + 1.0 + 1.0  # boot timeout, the probe, slack
    assert err.value.received == NOISE
    assert NOISE.hex(" ") in str(err.value)


@pytest.mark.parametrize(
    ("found", "advice"),
    [(1, r"rebuild the firmware .*make -C agent/mcu"), (3, "update the harness")],
)
def test_firmware_of_another_wire_version_is_refused_saying_which_side_to_update(
    board_factory, found: int, advice: str
) -> None:
    """A board whose HELLO announces another wire-format version is never spoken to: the
    error names both versions and the side to rebuild."""
    board = board_factory(b"", wire_version=found)
    versions = (
        f"firmware speaks wire-format version {found}, this harness version {wire.WIRE_VERSION}"
    )
    with pytest.raises(DeviceUnavailable, match=f"{versions}: {advice}"):
        connect(SerialSettings(url=board.url, hello_timeout=2.0))
