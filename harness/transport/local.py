"""The host itself as a device: files are copied, programs run as child processes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.lifecycle.disk import writing
from harness.lifecycle.process import run
from harness.transport.base import (
    CommandResult,
    DeviceFacts,
    Transport,
    TransportError,
    TransportTimeout,
)
from harness.transport.private_dir import ensure_private_dir
from harness.transport.process_stream import ProcessStream, start_stream_process


class LocalTransport(Transport):
    """Runs on this machine; ``work_dir`` plays the device's scratch directory.

    ``work_dir`` and every directory the harness writes in are checked to be the
    user's own before first use (:mod:`harness.transport.private_dir`); ``where``
    names the setting in errors.
    """

    def __init__(self, work_dir: str, where: str = "work_dir") -> None:
        self._work_dir = work_dir
        self._where = where
        self._checked: set[Path] = set()

    def _private(self, directory: Path) -> None:
        if directory not in self._checked:
            ensure_private_dir(directory, self._where)
            self._checked.add(directory)

    def facts(self) -> DeviceFacts:
        self._private(Path(self._work_dir))
        return DeviceFacts(abi=platform.machine(), os="linux", work_dir=self._work_dir)

    def push(self, local: Path, remote: str) -> None:
        target = Path(remote)
        self._private(target.parent)
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
        with writing(target.parent, f"copying {local.name} to the device"):
            try:
                shutil.copy2(local, tmp)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                raise

    def pull(self, remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(remote, local)

    def close(self) -> None:
        """Nothing to release: every command is its own process, and streams close themselves."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> CommandResult:
        try:
            done = run(argv, input=stdin, timeout=timeout, env=_merged_env(env))
        except subprocess.TimeoutExpired:
            raise TransportTimeout(f"host: {argv[0]} ran longer than {timeout:.1f} s") from None
        except OSError as exc:
            raise TransportError(f"host: cannot run {argv[0]}: {exc}") from None
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)

    def open_stream(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> ProcessStream:
        name = f"host: {Path(argv[0]).name}"
        try:
            process = start_stream_process(argv, name=name, env=_merged_env(env))
        except OSError as exc:
            raise TransportError(f"host: cannot start {argv[0]}: {exc}") from None
        return ProcessStream(process, name)

    def sha256(self, remote: str, timeout: float = 30.0) -> str | None:
        try:
            with open(remote, "rb") as handle:
                return hashlib.file_digest(handle, "sha256").hexdigest()
        except FileNotFoundError:
            return None

    def sha256_each(self, remotes: Sequence[str], timeout: float = 30.0) -> tuple[str | None, ...]:
        return tuple(self.sha256(remote) for remote in remotes)


def _merged_env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    if not env:
        return None
    return {**os.environ, **env}
