"""Serial-protocol pieces that need no emulator.

Frames, HELLO, the firmware's COBS (built for the host), port settings, the fault relay.
"""

from __future__ import annotations

import ctypes
import socket
import struct
import subprocess
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from cobs import cobs
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.channel.serial.frame import Frame, FrameError, FrameKind, decode_frame
from harness.channel.serial.frame_port import FramePort
from harness.channel.serial.hello import CAP_EXIT, DeviceHello, SerialProtocolError
from harness.data.messages import Action
from harness.devices.serial import port_settings
from harness.emulators.fault_relay import DirectionStats, FaultRates, FaultRelay
from harness.profiles.device_profile import ProfileError, parse_profile
from harness.transport.base import DeviceUnavailable
from harness.transport.serial import ResetLine, SerialSettings, open_port

ROOT = Path(__file__).resolve().parents[2]
MCU = ROOT / "agent" / "mcu"

# --------------------------------------------------------------------------- frames


@given(
    kind=st.sampled_from(list(FrameKind)),
    seq=st.integers(0, 255),
    flags=st.integers(0, 3),
    payload=st.binary(max_size=300),
)
def test_frames_round_trip_and_contain_no_zero_before_the_delimiter(
    kind, seq, flags, payload
) -> None:
    encoded = Frame(kind, seq, flags, payload).encode()
    assert encoded.endswith(b"\0") and b"\0" not in encoded[:-1]
    assert decode_frame(encoded[:-1]) == Frame(kind, seq, flags, payload)


def test_damaged_frames_are_refused() -> None:
    encoded = Frame(FrameKind.DATA, 7, 1, b"payload").encode()[:-1]
    flipped = bytearray(encoded)
    flipped[4] ^= 0x01
    with pytest.raises(FrameError, match="CRC"):
        decode_frame(bytes(flipped))
    with pytest.raises(FrameError, match="shorter"):
        decode_frame(cobs.encode(b"\x01\x02"))
    with pytest.raises(FrameError, match="COBS"):
        decode_frame(b"\x09\x01")


def _hello_payload(version: bytes = b"0.1.0+abc", capabilities: int = 0xFE | CAP_EXIT) -> bytes:
    return (
        struct.pack("<BBHHBBIII", 1, 1, 1024, 135, 3, 4, 4096, 99, capabilities)
        + bytes([len(version)])
        + version
    )


def test_hello_payload_parses() -> None:
    hello = DeviceHello.parse(_hello_payload())
    assert (hello.rx_buffer, hello.max_frame, hello.window, hello.tx_window) == (1024, 135, 3, 4)
    assert (hello.max_message, hello.session, hello.firmware_version) == (4096, 99, "0.1.0+abc")
    assert hello.serves(Action.LOAD) and hello.serves(Action.HELLO)
    assert not DeviceHello.parse(_hello_payload(capabilities=1 << Action.GET)).serves(Action.SET)


@pytest.mark.parametrize("payload", [b"", _hello_payload()[:20], _hello_payload() + b"x"])
def test_malformed_hello_is_a_protocol_error(payload: bytes) -> None:
    with pytest.raises(SerialProtocolError):
        DeviceHello.parse(payload)


# --------------------------------------------------------------------------- the firmware's COBS


@pytest.fixture(scope="module")
def c_cobs(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    """agent/mcu/src/cobs.c built for the host, to compare with the `cobs` package."""
    library = tmp_path_factory.mktemp("cobs") / "libmcucobs.so"
    subprocess.run(
        [
            "gcc",
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-shared",
            "-fPIC",
            f"-I{MCU / 'include'}",
            str(MCU / "src" / "cobs.c"),
            "-o",
            str(library),
        ],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(library))
    lib.cobs_encode.restype = ctypes.c_size_t
    lib.cobs_encode.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
    lib.cobs_decode.restype = ctypes.c_bool
    lib.cobs_decode.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ]
    return lib


def _c_encode(lib: ctypes.CDLL, data: bytes) -> bytes:
    out = ctypes.create_string_buffer(len(data) + len(data) // 254 + 2)
    size = lib.cobs_encode(data, len(data), out)
    return out.raw[:size]


def _c_decode(lib: ctypes.CDLL, data: bytes) -> bytes | None:
    out = ctypes.create_string_buffer(len(data) + 1)
    size = ctypes.c_size_t()
    if not lib.cobs_decode(data, len(data), out, len(out), ctypes.byref(size)):
        return None
    return out.raw[: size.value]


@settings(max_examples=300)
@given(st.binary(max_size=700) | st.binary(max_size=600).map(lambda b: b.replace(b"\0", b"\1")))
def test_c_cobs_encodes_like_the_python_package(c_cobs: ctypes.CDLL, data: bytes) -> None:
    assert _c_encode(c_cobs, data) == cobs.encode(data)
    assert _c_decode(c_cobs, cobs.encode(data)) == data


@settings(max_examples=300)
@given(st.binary(min_size=1, max_size=300))
def test_c_cobs_refuses_what_the_python_package_refuses(c_cobs: ctypes.CDLL, data: bytes) -> None:
    try:
        expected = cobs.decode(data)
    except cobs.DecodeError:
        expected = None
    assert _c_decode(c_cobs, data) == expected


# --------------------------------------------------------------------------- port settings


def serial_settings(settings: dict) -> SerialSettings:
    """The port settings of a serial profile whose transport fields are ``settings``."""
    return port_settings(parse_profile({"transport": {"kind": "serial", **settings}}, None, "b"))


def test_serial_settings_from_a_profile() -> None:
    config = serial_settings(
        {
            "port": "/dev/ttyACM0",
            "baudrate": 921600,
            "rtscts": True,
            "reset": "dtr",
            "boot_timeout": 2,
        }
    )
    assert config == SerialSettings(
        url="/dev/ttyACM0", baudrate=921600, rtscts=True, reset=ResetLine.DTR, boot_timeout=2.0
    )


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({}, "transport: give exactly one of 'port'"),
        ({"port": "/dev/x", "url": "socket://a:1"}, "give exactly one"),
        ({"url": ""}, "transport.url"),
        ({"url": "socket://a:1", "baudrate": "fast"}, "transport.baudrate"),
        ({"url": "socket://a:1", "baudrate": 9600.5}, "transport.baudrate"),
        ({"url": "socket://a:1", "reset": "power"}, "transport.reset"),
        ({"url": "socket://a:1", "rtscts": "yes"}, "transport.rtscts"),
        ({"url": "socket://a:1", "parity": "N"}, "transport.parity: unknown field"),
    ],
)
def test_bad_serial_settings_name_the_field(settings: dict, field: str) -> None:
    with pytest.raises(ProfileError, match=field):
        serial_settings(settings)


def test_ports_that_cannot_be_opened_are_device_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(DeviceUnavailable, match="cannot open"):
        open_port(SerialSettings(url=f"socket://127.0.0.1:{closed_port}"))
    with pytest.raises(DeviceUnavailable, match="/dev/no-such-tty"):
        open_port(SerialSettings(url="/dev/no-such-tty"))


# --------------------------------------------------------------------------- fault relay


@pytest.fixture
def echo_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that echoes its clients, one after the other."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(5)


def _through_relay(
    port: int, rates: FaultRates, seed: int, data: bytes
) -> tuple[bytes, dict[str, DirectionStats]]:
    with FaultRelay(("127.0.0.1", port), to_device=rates, to_host=FaultRates(), seed=seed) as relay:
        with socket.create_connection(("127.0.0.1", relay.port)) as client:
            client.sendall(data)
            client.shutdown(socket.SHUT_WR)
            received = b""
            while chunk := client.recv(4096):
                received += chunk
        return received, relay.stats()


def test_fault_relay_is_repeatable_and_counts_what_it_did(echo_server: int) -> None:
    data = bytes(range(256)) * 200
    rates = FaultRates(corrupt=0.01, drop=0.01, duplicate=0.01)
    first, stats = _through_relay(echo_server, rates, 5, data)
    out = stats["to_device"]
    assert out.bytes_in == len(data)
    assert out.bytes_out == len(data) - out.dropped + out.duplicated == len(first)
    assert 0.005 * len(data) < out.corrupted < 0.02 * len(data)
    assert zlib.crc32(first) != zlib.crc32(data)
    again, _ = _through_relay(echo_server, rates, 5, data)
    other, _ = _through_relay(echo_server, rates, 6, data)
    assert again == first and other != first


def test_fault_relay_without_faults_is_transparent(echo_server: int) -> None:
    data = bytes(range(256)) * 40
    received, stats = _through_relay(echo_server, FaultRates(), 1, data)
    assert received == data and stats["to_host"].bytes_out == len(data)


def test_fault_rates_are_checked() -> None:
    with pytest.raises(ValueError, match=r"0\.\.1"):
        FaultRates(corrupt=1.5)
    with pytest.raises(ValueError, match="more than 1"):
        FaultRates(corrupt=0.6, drop=0.6)


# --------------------------------------------------------------------------- frames over a port


class ChunkedPort:
    """A port without a file descriptor (like ``rfc2217://``) that gives scripted chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.timeout: float | None = None
        self._chunks = chunks
        self._pending = b""

    def read(self, size: int = 1) -> bytes:
        if not self._pending and self._chunks:
            self._pending = self._chunks.pop(0)
        data, self._pending = self._pending[:size], self._pending[size:]
        return data

    def write(self, data: bytes) -> int:
        return len(data)

    @property
    def in_waiting(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        pass


def test_frame_port_joins_split_frames_reports_damage_and_keeps_the_first_bytes() -> None:
    first = Frame(FrameKind.ACK, 3).encode()
    second = Frame(FrameKind.DATA, 0, 3, b"report").encode()
    chunks = [b"\0" + first[:2], first[2:] + b"\x13\x37\0" + second[:4], second[4:]]
    port = FramePort(ChunkedPort(list(chunks)), name="t")
    assert port.read_frames(0.1) == []  # half a frame so far
    middle = port.read_frames(0.1)
    assert middle[0] == Frame(FrameKind.ACK, 3) and isinstance(middle[1], FrameError)
    assert port.read_frames(0.1) == [Frame(FrameKind.DATA, 0, 3, b"report")]
    assert port.first_bytes == b"".join(chunks) and port.received == len(b"".join(chunks))


def test_frame_port_drops_a_run_without_delimiters_as_one_damaged_frame() -> None:
    port = FramePort(ChunkedPort([b"\x01" * 40000, b"\x01" * 40000]), name="t")
    assert port.read_frames(0.1) == []
    (dropped,) = port.read_frames(0.1)
    assert isinstance(dropped, FrameError) and "without a delimiter" in str(dropped)
    assert len(port.first_bytes) == 256
