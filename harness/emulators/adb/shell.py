"""The ``shell:``, ``shell,v2:`` and ``exec:`` services: processes in the device root.

``shell,v2`` frames both directions as packets of ``u8 id, u32 length, data``: the host
sends stdin, close-stdin and window-size packets; the device sends stdout, stderr and
one exit packet (``u8`` code) before closing the stream. ``shell:`` (v1) and ``exec:``
carry raw bytes: stdin in, stdout and stderr mixed out, no exit code.

Commands get pipes (``raw``); an interactive ``adb shell`` gets a pty, with the shell
as session leader and the host's window size applied. Closing the stream kills the
process and everything it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import errno
import fcntl
import os
import re
import signal
import struct
import termios
from dataclasses import dataclass
from typing import Protocol

from harness.emulators.adb.device_root import DEVICE_PATH, DeviceNamespace
from harness.emulators.adb.host_connection import DeviceStream, StreamClosed
from harness.emulators.adb.protocol import MAX_PAYLOAD

_PACKET_HEADER = struct.Struct("<BI")
DEVICE_SHELL = "/system/bin/sh"


class PacketId(enum.IntEnum):
    """Shell protocol v2 packet ids."""

    STDIN = 0
    STDOUT = 1
    STDERR = 2
    EXIT = 3
    CLOSE_STDIN = 4
    WINDOW_SIZE_CHANGE = 5


@dataclass(frozen=True)
class ShellRequest:
    """A parsed ``shell[,opt...]:command`` or ``exec:command`` service name."""

    command: str
    v2: bool
    pty: bool = False
    term: str | None = None

    @classmethod
    def parse(cls, service: str) -> ShellRequest | None:
        """The request, or None if ``service`` is no shell or exec service."""
        if service.startswith("exec:"):
            return cls(service[len("exec:") :], v2=False)
        head, sep, command = service.partition(":")
        options = head.split(",")
        if not sep or options[0] != "shell":
            return None
        term = next((o[len("TERM=") :] for o in options if o.startswith("TERM=")), None)
        # As adbd: a pty when asked for, or by default for an interactive shell.
        pty = "pty" in options or ("raw" not in options and not command)
        return cls(command, v2="v2" in options[1:], pty=pty, term=term)

    def shell_argv(self) -> list[str]:
        """``sh -c COMMAND`` or an interactive ``sh``; with a pty, as its session leader."""
        shell = [DEVICE_SHELL, "-c", self.command] if self.command else [DEVICE_SHELL]
        return ["setsid", "--ctty", *shell] if self.pty else shell


def device_environment(term: str | None) -> dict[str, str]:
    """The environment of device processes: Android's names, the host's tools."""
    env = {
        "PATH": DEVICE_PATH,
        "HOME": "/",
        "TMPDIR": "/data/local/tmp",
        "SHELL": DEVICE_SHELL,
        "ANDROID_ROOT": "/system",
        "ANDROID_DATA": "/data",
        "USER": "root",
        "LOGNAME": "root",
    }
    if term:
        env["TERM"] = term
    return env


async def serve_shell(
    stream: DeviceStream, namespace: DeviceNamespace, request: ShellRequest
) -> None:
    """Run the request's command (or an interactive shell) and relay its I/O."""
    argv = namespace.command_argv(request.shell_argv())
    env = device_environment(request.term)
    pipe = asyncio.subprocess.PIPE
    terminal = _Terminal() if request.pty else None
    if terminal is not None:
        slave = terminal.slave
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
        )
        input_side: _Input = terminal
        outputs = [(await terminal.reader(), PacketId.STDOUT)]
    else:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=pipe,
            stdout=pipe,
            stderr=pipe if request.v2 else asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        assert process.stdin is not None and process.stdout is not None
        input_side = _PipeInput(process.stdin)
        outputs = [(process.stdout, PacketId.STDOUT)]
        if process.stderr is not None:
            outputs.append((process.stderr, PacketId.STDERR))
    feeder = asyncio.create_task(
        _feed_packets(stream, input_side) if request.v2 else _feed_raw(stream, input_side)
    )
    try:
        await asyncio.gather(
            *(_relay(source, stream, kind if request.v2 else None) for source, kind in outputs)
        )
        code = _exit_status(await process.wait())
        if request.v2:
            await stream.write(_packet(PacketId.EXIT, bytes([code])))
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)
        if process.returncode is None:
            process.kill()  # unshare: --kill-child ends the PID namespace with it
            await process.wait()
        if terminal is not None:
            terminal.close()


class _Input(Protocol):
    """Where the host's input goes: a stdin pipe or a pty master."""

    async def write(self, data: bytes) -> bool:
        """Deliver ``data``; False once the process no longer reads."""

    def end_input(self) -> None:
        """The host closed stdin."""

    def resize(self, spec: bytes) -> None:
        """The host's terminal is now ``ROWSxCOLS,XPIXELSxYPIXELS``."""


class _PipeInput:
    """The process's stdin pipe."""

    def __init__(self, pipe: asyncio.StreamWriter) -> None:
        self._pipe = pipe

    async def write(self, data: bytes) -> bool:
        try:
            self._pipe.write(data)
            await self._pipe.drain()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def end_input(self) -> None:
        self._pipe.close()

    def resize(self, spec: bytes) -> None:
        pass  # no terminal to resize


class _Terminal:
    """A pty: the process gets the slave side, the service reads and writes the master."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self._transport: asyncio.ReadTransport | None = None

    async def reader(self) -> asyncio.StreamReader:
        """A reader of the master side; call after the process has a copy of the slave."""
        os.close(self.slave)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        master = os.fdopen(os.dup(self.master), "rb", buffering=0)
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), master
        )
        return reader

    async def write(self, data: bytes) -> bool:
        loop = asyncio.get_running_loop()
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.master, view) :]
            except BlockingIOError:
                writable = loop.create_future()
                loop.add_writer(self.master, writable.set_result, None)
                try:
                    await writable
                finally:
                    loop.remove_writer(self.master)
            except OSError:
                return False
        return True

    def end_input(self) -> None:
        pass  # a pty cannot close just its input; closing it all could lose output (as adbd)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        with contextlib.suppress(OSError):
            os.close(self.master)

    def resize(self, spec: bytes) -> None:
        rows, cols, x_pixels, y_pixels = (int(n) for n in re.findall(rb"\d+", spec)[:4])
        winsize = struct.pack("HHHH", rows, cols, x_pixels, y_pixels)
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, winsize)


def _packet(packet_id: PacketId, data: bytes) -> bytes:
    return _PACKET_HEADER.pack(packet_id, len(data)) + data


def _exit_status(returncode: int) -> int:
    """adbd's exit code: the process's, or 128 + signal number if a signal ended it."""
    if returncode < 0:
        return 128 + (-returncode if -returncode in signal.valid_signals() else 0)
    return returncode & 0xFF


async def _relay(
    source: asyncio.StreamReader, stream: DeviceStream, packet_id: PacketId | None
) -> None:
    """Copy process output to the host, as v2 packets or raw bytes."""
    overhead = _PACKET_HEADER.size if packet_id is not None else 0
    chunk = max(1, stream.max_write - overhead)
    while True:
        try:
            data = await source.read(chunk)
        except OSError as exc:  # EIO: a pty master whose slave side is all closed
            if exc.errno != errno.EIO:
                raise
            return
        if not data:
            return
        await stream.write(_packet(packet_id, data) if packet_id is not None else data)


async def _feed_packets(stream: DeviceStream, target: _Input) -> None:
    """Apply the host's v2 packets: stdin data, close-stdin, window size."""
    stdin_open = True
    try:
        while True:
            packet_id, length = _PACKET_HEADER.unpack(
                await stream.read_exactly(_PACKET_HEADER.size)
            )
            if length > MAX_PAYLOAD:
                raise StreamClosed(f"shell packet of {length} bytes is too large")
            data = await stream.read_exactly(length)
            if packet_id == PacketId.STDIN and stdin_open:
                stdin_open = await target.write(data)
            elif packet_id == PacketId.CLOSE_STDIN and stdin_open:
                stdin_open = False
                target.end_input()
            elif packet_id == PacketId.WINDOW_SIZE_CHANGE:
                with contextlib.suppress(ValueError, OSError):
                    target.resize(data)
            # Unknown ids are ignored, as adbd does.
    except StreamClosed:
        pass


async def _feed_raw(stream: DeviceStream, target: _Input) -> None:
    """Copy the host's bytes to the process until the stream ends."""
    stdin_open = True
    while data := await stream.read_some():
        if stdin_open:
            stdin_open = await target.write(data)
