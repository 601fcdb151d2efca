"""One host connection to adb-emu: CNXN/AUTH handshake, streams and their flow control.

Flow control is ADB's classic one (adb 1.0.41 has no ``delayed_ack``): each side sends
one WRTE per stream and waits for the peer's OKAY before the next. The device
acknowledges a host WRTE only when the service asks for more input, so a slow consumer
(a process not reading its stdin, a slow disk) holds the host back instead of
buffering without bound.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from harness.emulators.adb.auth import TOKEN_SIZE, AdbPublicKey
from harness.emulators.adb.protocol import (
    ADB_VERSION,
    MAX_PAYLOAD,
    AuthType,
    Command,
    Message,
    ProtocolError,
    read_message,
)
from harness.errors import InfrastructureError

log = logging.getLogger("adb-emu")

HANDSHAKE_TIMEOUT = 10.0  # seconds for the host's first CNXN
MAX_STREAMS = 64  # open streams per connection


class StreamClosed(InfrastructureError):
    """The host closed the stream (or the connection) while a service used it."""


Service = Callable[["DeviceStream"], Awaitable[None]]
ServiceFinder = Callable[[str], Service | None]


@dataclass(frozen=True)
class Identity:
    """What a connection tells hosts about the device and whom it lets in."""

    banner: bytes
    adb_keys: tuple[AdbPublicKey, ...] | None  # None: no AUTH (like ro.adb.secure=0)


class DeviceStream:
    """One stream the host OPENed, seen from the device."""

    def __init__(self, connection: AdbConnection, local_id: int, remote_id: int) -> None:
        self.local_id = local_id
        self.remote_id = remote_id
        self._connection = connection
        self._inbound: collections.deque[bytes] = collections.deque()
        self._arrived = asyncio.Event()
        self._unacked = False
        self._buffer = bytearray()
        self._can_send = asyncio.Event()
        self._can_send.set()
        self._write_lock = asyncio.Lock()
        self._closed = False

    # -- called by the connection's reader ---------------------------------------

    def deliver(self, payload: bytes) -> None:
        """A WRTE from the host arrived."""
        if len(self._inbound) > 1:
            raise ProtocolError(f"stream {self.local_id}: host sent WRTE without waiting for OKAY")
        self._inbound.append(payload)
        self._arrived.set()

    def acknowledge(self) -> None:
        """The host sent OKAY for our last WRTE."""
        self._can_send.set()

    def mark_closed(self) -> None:
        """The host sent CLSE, or the connection ended."""
        self._closed = True
        self._arrived.set()
        self._can_send.set()

    # -- used by services --------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def max_write(self) -> int:
        """The largest payload one WRTE carries on this connection."""
        return self._connection.max_send

    async def read_some(self) -> bytes:
        """The next bytes the host wrote; ``b""`` once the host closed the stream."""
        if self._buffer:
            data = bytes(self._buffer)
            self._buffer.clear()
            return data
        return await self._next_payload()

    async def read_exactly(self, size: int) -> bytes:
        """Exactly ``size`` bytes; :class:`StreamClosed` if the host closes first."""
        while len(self._buffer) < size:
            payload = await self._next_payload()
            if not payload:
                raise StreamClosed(f"stream {self.local_id} closed by the host")
            self._buffer += payload
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def write(self, data: bytes) -> None:
        """Send ``data`` as WRTEs of at most the negotiated size, each after the last OKAY."""
        step = self._connection.max_send
        async with self._write_lock:
            for offset in range(0, len(data), step):
                await self._can_send.wait()
                if self._closed:
                    raise StreamClosed(f"stream {self.local_id} closed by the host")
                self._can_send.clear()
                chunk = bytes(data[offset : offset + step])
                await self._connection.send(
                    Message(Command.WRTE, self.local_id, self.remote_id, chunk)
                )

    async def _next_payload(self) -> bytes:
        if self._unacked:
            self._unacked = False
            if not self._closed:
                await self._connection.send(Message(Command.OKAY, self.local_id, self.remote_id))
        while not self._inbound:
            if self._closed:
                return b""
            self._arrived.clear()
            await self._arrived.wait()
        self._unacked = True
        return self._inbound.popleft()


class AdbConnection:
    """Serves one TCP connection from an adb server."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        identity: Identity,
        find_service: ServiceFinder,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._identity = identity
        self._find_service = find_service
        self._write_lock = asyncio.Lock()
        self._streams: dict[int, DeviceStream] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._next_id = 1
        self._with_checksum = True
        self.max_send = 4096
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"

    async def serve(self) -> None:
        """Handshake, then dispatch messages until the host disconnects."""
        try:
            first = await asyncio.wait_for(
                read_message(self._reader, MAX_PAYLOAD), HANDSHAKE_TIMEOUT
            )
            await self._handshake(first)
            while True:
                await self._dispatch(await read_message(self._reader, MAX_PAYLOAD))
        except (asyncio.IncompleteReadError, ConnectionError):
            log.info("%s: host disconnected", self.peer)
        except TimeoutError:
            log.warning("%s: no CNXN within %.0f s", self.peer, HANDSHAKE_TIMEOUT)
        except ProtocolError as exc:
            log.warning("%s: protocol error, dropping connection: %s", self.peer, exc)
        finally:
            await self._close_all()

    async def send(self, message: Message) -> None:
        """Write one message to the host."""
        async with self._write_lock:
            self._writer.write(message.encode(with_checksum=self._with_checksum))
            await self._writer.drain()

    async def _handshake(self, message: Message) -> None:
        """CNXN from the host; with adb_keys, AUTH tokens until a known key signs one."""
        if message.command is not Command.CNXN:
            raise ProtocolError(f"{message.command.name} before CNXN")
        self._with_checksum = message.arg0 < ADB_VERSION
        self.max_send = max(256, min(message.arg1, MAX_PAYLOAD))
        keys = self._identity.adb_keys
        while keys is not None:
            token = os.urandom(TOKEN_SIZE)
            await self.send(Message(Command.AUTH, AuthType.TOKEN, 0, token))
            reply = await read_message(self._reader, MAX_PAYLOAD)
            while reply.command is Command.AUTH and reply.arg0 == AuthType.RSAPUBLICKEY:
                log.warning(
                    "%s: host offered a key that is not in adb_keys; it stays unauthorized",
                    self.peer,
                )
                reply = await read_message(self._reader, MAX_PAYLOAD)
            if reply.command is Command.CNXN:
                continue  # the host started over: new token
            if reply.command is not Command.AUTH or reply.arg0 != AuthType.SIGNATURE:
                raise ProtocolError(f"{reply.command.name} before the connection was authorized")
            if any(key.verifies(token, reply.payload) for key in keys):
                break
        await self.send(Message(Command.CNXN, ADB_VERSION, MAX_PAYLOAD, self._identity.banner))
        log.info("%s: connected", self.peer)

    async def _dispatch(self, message: Message) -> None:
        command, remote_id, local_id = message.command, message.arg0, message.arg1
        if command is Command.OPEN:
            await self._open(remote_id, message.payload)
            return
        stream = self._streams.get(local_id)
        if stream is None or stream.remote_id != remote_id:
            return  # late message for a stream that is gone
        if command is Command.WRTE:
            stream.deliver(message.payload)
        elif command is Command.OKAY:
            stream.acknowledge()
        elif command is Command.CLSE:
            del self._streams[local_id]
            stream.mark_closed()
            task = self._tasks.get(local_id)
            if task is not None:
                task.cancel()
        else:
            log.warning("%s: ignoring %s on an open connection", self.peer, command.name)

    async def _open(self, remote_id: int, payload: bytes) -> None:
        name = payload.rstrip(b"\0").decode("utf-8", "surrogateescape")
        service = self._find_service(name)
        if service is None or len(self._streams) >= MAX_STREAMS:
            reason = "unknown service" if service is None else f"more than {MAX_STREAMS} streams"
            log.warning("%s: refusing OPEN %r: %s", self.peer, name[:80], reason)
            await self.send(Message(Command.CLSE, 0, remote_id))
            return
        local_id, self._next_id = self._next_id, self._next_id + 1
        stream = DeviceStream(self, local_id, remote_id)
        self._streams[local_id] = stream
        await self.send(Message(Command.OKAY, local_id, remote_id))
        log.info("%s: stream %d: %s", self.peer, local_id, name[:200])
        self._tasks[local_id] = asyncio.create_task(self._run(stream, service))

    async def _run(self, stream: DeviceStream, service: Service) -> None:
        try:
            await service(stream)
        except (StreamClosed, ConnectionError):
            pass
        except Exception:
            log.exception("%s: stream %d failed", self.peer, stream.local_id)
        finally:
            self._tasks.pop(stream.local_id, None)
            if self._streams.pop(stream.local_id, None) is not None:
                stream.mark_closed()
                with contextlib.suppress(ConnectionError):
                    await self.send(Message(Command.CLSE, stream.local_id, stream.remote_id))

    async def _close_all(self) -> None:
        for stream in self._streams.values():
            stream.mark_closed()
        self._streams.clear()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._writer.close()
