"""The ``sync:`` service: ``adb push``, ``adb pull`` and ``adb ls`` (sync protocol v1).

Requests are ``id[4] u32 length`` followed by ``length`` bytes (a path for STAT, LIST,
SEND and RECV). File data travels as ``DATA u32 length bytes`` chunks of at most 64 KiB
and ends with ``DONE u32 mtime`` (push) or ``DONE 0`` (pull). Device paths map into
the device root through :meth:`DeviceNamespace.host_path`.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from pathlib import Path

from harness.emulators.adb.device_root import DeviceNamespace
from harness.emulators.adb.host_connection import DeviceStream, StreamClosed

SYNC_DATA_MAX = 64 * 1024
MAX_PATH = 1024
_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<4sI")
_STAT = struct.Struct("<4sIII")
_DENT = struct.Struct("<4sIIII")


class _Replies:
    """Collects reply frames and writes them in WRTEs as large as the connection allows."""

    def __init__(self, stream: DeviceStream) -> None:
        self._stream = stream
        self._pending = bytearray()

    async def add(self, frame: bytes) -> None:
        self._pending += frame
        if len(self._pending) >= self._stream.max_write:
            await self.flush()

    async def flush(self) -> None:
        if self._pending:
            data, self._pending = bytes(self._pending), bytearray()
            await self._stream.write(data)

    async def fail(self, message: str) -> None:
        encoded = message.encode("utf-8", "replace")
        await self.add(_HEADER.pack(b"FAIL", len(encoded)) + encoded)
        await self.flush()


async def serve_sync(stream: DeviceStream, namespace: DeviceNamespace) -> None:
    """Answer sync requests until QUIT or until the host closes the stream."""
    replies = _Replies(stream)
    while True:
        request, length = _HEADER.unpack(await stream.read_exactly(_HEADER.size))
        if request == b"QUIT":
            return
        if length > MAX_PATH:
            await replies.fail(f"path of {length} bytes is longer than {MAX_PATH}")
            return
        path = (await stream.read_exactly(length)).decode("utf-8", "surrogateescape")
        if request == b"STAT":
            await _stat(replies, namespace, path)
        elif request == b"LIST":
            await _list(replies, namespace, path)
        elif request == b"SEND":
            await _receive_file(stream, replies, namespace, path)
        elif request == b"RECV":
            await _send_file(replies, namespace, path)
        else:
            await replies.fail(f"adb-emu does not implement sync request {request!r}")
            return
        await replies.flush()


async def _stat(replies: _Replies, namespace: DeviceNamespace, path: str) -> None:
    try:
        info = os.lstat(namespace.host_path(path, follow_last=False))
    except OSError:
        await replies.add(_STAT.pack(b"STAT", 0, 0, 0))
        return
    await replies.add(_STAT.pack(b"STAT", *_mode_size_time(info)))


async def _list(replies: _Replies, namespace: DeviceNamespace, path: str) -> None:
    try:
        with os.scandir(namespace.host_path(path)) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                name = os.fsencode(entry.name)
                await replies.add(_DENT.pack(b"DENT", *_mode_size_time(info), len(name)) + name)
    except OSError:
        pass  # adbd lists nothing for a path it cannot open
    await replies.add(_DENT.pack(b"DONE", 0, 0, 0, 0))


async def _send_file(replies: _Replies, namespace: DeviceNamespace, path: str) -> None:
    """RECV: the host pulls a device file."""
    try:
        source = namespace.host_path(path).open("rb")
    except OSError as exc:
        await replies.fail(exc.strerror or str(exc))
        return
    with source:
        while chunk := source.read(SYNC_DATA_MAX):
            await replies.add(_HEADER.pack(b"DATA", len(chunk)) + chunk)
    await replies.add(_HEADER.pack(b"DONE", 0))


async def _receive_file(
    stream: DeviceStream, replies: _Replies, namespace: DeviceNamespace, spec: str
) -> None:
    """SEND ``path,mode``: the host pushes a file; parent directories are created."""
    device_path, comma, mode_text = spec.rpartition(",")
    if not comma:
        device_path, mode_text = spec, "33188"  # 0o100644
    try:
        mode = int(mode_text)
    except ValueError:
        mode = 0o100644
    error: str | None = None
    target: Path | None = None
    sink = None
    link_target = bytearray()
    try:
        target = _prepare_target(namespace, device_path)
        if not stat.S_ISLNK(mode):
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode & 0o7777)
            sink = os.fdopen(fd, "wb")
    except OSError as exc:
        error = f"couldn't create file: {exc.strerror or exc}"
    try:
        while True:
            kind, length = _HEADER.unpack(await stream.read_exactly(_HEADER.size))
            if kind == b"DONE":
                mtime = length
                break
            if kind != b"DATA" or length > SYNC_DATA_MAX:
                raise StreamClosed(f"bad push packet {kind!r} of {length} bytes")
            data = await stream.read_exactly(length)
            if error is not None:
                continue  # keep reading to DONE so the host sees our FAIL
            try:
                if sink is not None:
                    sink.write(data)
                else:
                    link_target += data
            except OSError as exc:
                error = f"write failed: {exc.strerror or exc}"
    finally:
        if sink is not None:
            sink.close()
    if error is None and target is not None:
        try:
            if stat.S_ISLNK(mode):
                os.symlink(bytes(link_target), target)
            os.utime(target, (mtime, mtime), follow_symlinks=False)
        except OSError as exc:
            error = f"couldn't finish file: {exc.strerror or exc}"
    if error is not None:
        await replies.fail(error)
        return
    await replies.add(_HEADER.pack(b"OKAY", 0))


def _prepare_target(namespace: DeviceNamespace, device_path: str) -> Path:
    """The host path to write ``device_path`` to, with parents made and any old file removed."""
    target = namespace.host_path(device_path, follow_last=False)
    if target == namespace.host_path("/"):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
    target.parent.mkdir(mode=0o775, parents=True, exist_ok=True)
    if target.is_dir() and not target.is_symlink():
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
    target.unlink(missing_ok=True)
    return target


def _mode_size_time(info: os.stat_result) -> tuple[int, int, int]:
    return info.st_mode & 0xFFFFFFFF, info.st_size & 0xFFFFFFFF, int(info.st_mtime) & 0xFFFFFFFF
