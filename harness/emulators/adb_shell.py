"""The ``shell:``, ``shell,v2:`` and ``exec:`` services: processes in the device root.

``shell,v2`` frames both directions as packets of ``u8 id, u32 length, data``: the host
sends stdin, close-stdin and window-size packets; the device sends stdout, stderr and
one exit packet (``u8`` code) before closing the stream. ``shell:`` (v1) and ``exec:``
carry raw bytes: stdin in, stdout and stderr mixed out, no exit code.

Processes get pipes, never a pty (see docs/adb-emu.md). Closing the stream kills the
process and everything it started.
"""

from __future__ import annotations

import asyncio
import enum
import signal
import struct
from asyncio.subprocess import Process
from dataclasses import dataclass

from harness.emulators.adb_connection import DeviceStream, StreamClosed
from harness.emulators.adb_device_root import DEVICE_PATH, DeviceNamespace
from harness.emulators.adb_protocol import MAX_PAYLOAD

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
        return cls(command, v2="v2" in options[1:], term=term)


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


async def serve_shell(stream: DeviceStream, namespace: DeviceNamespace, request: ShellRequest) -> None:
    """Run the request's command (or an interactive ``sh -i``) and relay its I/O."""
    shell_argv = [DEVICE_SHELL, "-c", request.command] if request.command else [DEVICE_SHELL, "-i"]
    process = await asyncio.create_subprocess_exec(
        *namespace.command_argv(shell_argv),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE if request.v2 else asyncio.subprocess.STDOUT,
        env=device_environment(request.term),
        start_new_session=True,
    )
    feeder = asyncio.create_task(
        _feed_packets(stream, process) if request.v2 else _feed_raw(stream, process)
    )
    try:
        if request.v2:
            await asyncio.gather(
                _relay(process.stdout, stream, PacketId.STDOUT),
                _relay(process.stderr, stream, PacketId.STDERR),
            )
            code = _exit_status(await process.wait())
            await stream.write(_packet(PacketId.EXIT, bytes([code])))
        else:
            await _relay(process.stdout, stream, None)
            await process.wait()
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)
        if process.returncode is None:
            process.kill()  # unshare: --kill-child ends the PID namespace with it
            await process.wait()


def _packet(packet_id: PacketId, data: bytes) -> bytes:
    return _PACKET_HEADER.pack(packet_id, len(data)) + data


def _exit_status(returncode: int) -> int:
    """adbd's exit code: the process's, or 128 + signal number if a signal ended it."""
    if returncode < 0:
        return 128 + (-returncode if -returncode in signal.valid_signals() else 0)
    return returncode & 0xFF


async def _relay(source: asyncio.StreamReader | None, stream: DeviceStream, packet_id: PacketId | None) -> None:
    """Copy a process output pipe to the host, as v2 packets or raw bytes."""
    assert source is not None
    overhead = _PACKET_HEADER.size if packet_id is not None else 0
    chunk = max(1, stream.max_write - overhead)
    while data := await source.read(chunk):
        await stream.write(_packet(packet_id, data) if packet_id is not None else data)


async def _feed_packets(stream: DeviceStream, process: Process) -> None:
    """Apply the host's v2 packets to the process (stdin data, close-stdin)."""
    stdin_open = True
    try:
        while True:
            packet_id, length = _PACKET_HEADER.unpack(await stream.read_exactly(_PACKET_HEADER.size))
            if length > MAX_PAYLOAD:
                raise StreamClosed(f"shell packet of {length} bytes is too large")
            data = await stream.read_exactly(length)
            if packet_id == PacketId.STDIN and stdin_open:
                stdin_open = await _write_stdin(process, data)
            elif packet_id == PacketId.CLOSE_STDIN and stdin_open:
                stdin_open = False
                _close_stdin(process)
            # WINDOW_SIZE_CHANGE has no pty to apply to; unknown ids are ignored as adbd does.
    except StreamClosed:
        pass


async def _feed_raw(stream: DeviceStream, process: Process) -> None:
    """Copy the host's bytes to the process's stdin until the stream ends."""
    stdin_open = True
    while data := await stream.read_some():
        if stdin_open:
            stdin_open = await _write_stdin(process, data)


async def _write_stdin(process: Process, data: bytes) -> bool:
    """Write to the process's stdin; False once the process no longer reads it."""
    assert process.stdin is not None
    try:
        process.stdin.write(data)
        await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


def _close_stdin(process: Process) -> None:
    assert process.stdin is not None
    process.stdin.close()
