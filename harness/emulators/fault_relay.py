"""A TCP relay that damages the bytes of a serial link, for testing the framed protocol.

The relay connects to an upstream socket (QEMU's UART0 server) and accepts one
client on 127.0.0.1. Each byte, in each direction, is independently dropped,
corrupted (XORed with a random non-zero byte) or duplicated with the configured
probabilities, drawn from a RNG seeded per direction, so a run is repeatable
for a given seed and byte stream.
"""

from __future__ import annotations

import random
import socket
import threading
from dataclasses import dataclass

LISTEN_HOST = "127.0.0.1"
_CHUNK = 4096
_ACCEPT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class FaultRates:
    """Probability per byte of each fault; at most one fault hits a byte."""

    corrupt: float = 0.0
    drop: float = 0.0
    duplicate: float = 0.0

    def __post_init__(self) -> None:
        for name in ("corrupt", "drop", "duplicate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"fault rate {name} must be within 0..1; got {value!r}")
        if self.corrupt + self.drop + self.duplicate > 1.0:
            raise ValueError(f"fault rates add up to more than 1: {self}")


@dataclass(frozen=True)
class DirectionStats:
    """What the relay did to the bytes of one direction."""

    bytes_in: int = 0
    bytes_out: int = 0
    corrupted: int = 0
    dropped: int = 0
    duplicated: int = 0


class _FaultyPipe:
    """Copies one socket's bytes to another, damaging them."""

    def __init__(self, name: str, rates: FaultRates, seed: int) -> None:
        self.name = name
        self._rates = rates
        self._rng = random.Random(f"{seed}:{name}")
        self._counts = {
            "bytes_in": 0,
            "bytes_out": 0,
            "corrupted": 0,
            "dropped": 0,
            "duplicated": 0,
        }
        self._lock = threading.Lock()

    def damage(self, data: bytes) -> bytes:
        """``data`` after this direction's faults."""
        rates = self._rates
        out = bytearray()
        drop_below = rates.drop
        corrupt_below = drop_below + rates.corrupt
        duplicate_below = corrupt_below + rates.duplicate
        counts = {"dropped": 0, "corrupted": 0, "duplicated": 0}
        for byte in data:
            draw = self._rng.random()
            if draw < drop_below:
                counts["dropped"] += 1
            elif draw < corrupt_below:
                out.append(byte ^ self._rng.randrange(1, 256))
                counts["corrupted"] += 1
            elif draw < duplicate_below:
                out += bytes((byte, byte))
                counts["duplicated"] += 1
            else:
                out.append(byte)
        with self._lock:
            self._counts["bytes_in"] += len(data)
            self._counts["bytes_out"] += len(out)
            for key, value in counts.items():
                self._counts[key] += value
        return bytes(out)

    def stats(self) -> DirectionStats:
        with self._lock:
            return DirectionStats(**self._counts)

    def run(self, source: socket.socket, sink: socket.socket) -> None:
        """Pump until either side closes, then shut the sink's writing half."""
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                damaged = self.damage(data)
                if damaged:
                    sink.sendall(damaged)
        except OSError:
            pass  # a side went away: the relay's job ends
        finally:
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass


class FaultRelay:
    """Relay between an upstream TCP server and one local client, damaging both directions."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        to_device: FaultRates,
        to_host: FaultRates,
        seed: int,
    ) -> None:
        self._upstream_address = upstream
        self._to_device = _FaultyPipe("to_device", to_device, seed)
        self._to_host = _FaultyPipe("to_host", to_host, seed)
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.port = 0

    @property
    def url(self) -> str:
        """The pyserial URL clients connect to."""
        return f"socket://{LISTEN_HOST}:{self.port}"

    def start(self) -> FaultRelay:
        """Listen locally and connect upstream; the pumps start when the client connects."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((LISTEN_HOST, 0))
        listener.listen(1)
        listener.settimeout(_ACCEPT_TIMEOUT_S)
        self._listener = listener
        self.port = listener.getsockname()[1]
        upstream = socket.create_connection(self._upstream_address, timeout=10.0)
        upstream.settimeout(None)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sockets.append(upstream)
        accept = threading.Thread(
            target=self._serve, args=(upstream,), name="fault-relay", daemon=True
        )
        self._threads.append(accept)
        accept.start()
        return self

    def _serve(self, upstream: socket.socket) -> None:
        assert self._listener is not None
        try:
            client, _ = self._listener.accept()
        except OSError:
            return  # closed before a client came
        client.settimeout(None)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        back = threading.Thread(
            target=self._to_host.run,
            args=(upstream, client),
            name="fault-relay-to-host",
            daemon=True,
        )
        with self._lock:
            self._sockets.append(client)
            self._threads.append(back)
        back.start()
        self._to_device.run(client, upstream)

    def stats(self) -> dict[str, DirectionStats]:
        """Per direction (``to_device``, ``to_host``): bytes seen and faults applied."""
        return {"to_device": self._to_device.stats(), "to_host": self._to_host.stats()}

    def close(self) -> None:
        """Close every socket and wait for the pumps to end; safe to call twice."""
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes a pending accept()
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(5.0)

    def __enter__(self) -> FaultRelay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
