"""``labgrid-client`` calls as one identity against one coordinator, bounded in time and output.

labgrid's own client is the harness's way into a lab (its gRPC protocol is labgrid's
business). Every call is an argv list run with the identity's ``LG_HOSTNAME`` and
``LG_USERNAME``; what it prints is bounded (a client relaying a hostile coordinator
cannot fill this process's memory) and its failure is one line, labgrid's own error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from harness.farm.lab_places import LabIdentity, PlaceListError, PlaceState, parse_places
from harness.transport.base import DeviceUnavailable

CLIENT = "labgrid-client"
_COMMAND_TIMEOUT_S = 30.0
_OUTPUT_LIMIT = 256 * 1024  # what a labgrid-client call may print before it is refused


class LabgridError(DeviceUnavailable):
    """labgrid's client failed, or printed something the harness does not accept."""


class LabgridTimeout(LabgridError):
    """A ``labgrid-client`` call ran past its time; ``output`` is what it printed until then."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


def find_client_path(search_path: str | None = None) -> str | None:
    """Path of ``labgrid-client`` (beside this Python, else on PATH), or None."""
    path = (
        search_path
        if search_path is not None
        else os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    )
    return shutil.which(CLIENT, path=path)


class LabgridClient:
    """``labgrid-client`` calls as one identity against one coordinator."""

    def __init__(self, client: str, coordinator: str | None, identity: LabIdentity) -> None:
        self.client = client
        self.coordinator = coordinator
        self.identity = identity

    def argv(self, *args: str) -> list[str]:
        coordinator = ["-x", self.coordinator] if self.coordinator else []
        return [self.client, *coordinator, *args]

    def run(
        self,
        args: Sequence[str],
        timeout: float = _COMMAND_TIMEOUT_S,
        identity: LabIdentity | None = None,
    ) -> str:
        """Run ``labgrid-client ARGS`` and return what it printed; :class:`LabgridError`."""
        argv = self.argv(*args)
        env = {
            **os.environ,
            **(identity or self.identity).environment(),
            "PYTHONUNBUFFERED": "1",
        }  # a token printed before a timeout is not lost
        try:
            returncode, stdout, stderr = _run_bounded(argv, env, timeout)
        except subprocess.TimeoutExpired as exc:
            printed = bytes(exc.output or b"").decode(errors="replace")
            raise LabgridTimeout(
                f"'{CLIENT} {' '.join(args)}' did not finish within {timeout:.1f} s", printed
            ) from None
        except OSError as exc:
            raise LabgridError(f"cannot run {argv[0]}: {exc}") from None
        if stdout is None:
            raise LabgridError(
                f"'{CLIENT} {' '.join(args)}' printed more than {_OUTPUT_LIMIT} bytes; refused"
            )
        if returncode != 0:
            errors = (stderr or stdout).decode(errors="replace").strip()
            raise LabgridError(
                f"'{CLIENT} {' '.join(args)}' failed with exit code {returncode}: "
                f"{_last_line(errors)}"
            )
        return stdout.decode(errors="replace")

    def places(self) -> list[PlaceState]:
        try:
            return parse_places(self.run(["-v", "places"]))
        except PlaceListError as exc:
            raise LabgridError(f"{self.coordinator or 'the coordinator'}: {exc}") from None


def _run_bounded(
    argv: list[str], env: dict[str, str], timeout: float
) -> tuple[int, bytes | None, bytes]:
    """Run ``argv``; (exit status, stdout or None if longer than the limit, stderr's first
    bytes). Output past the limit is read and dropped, so a client relaying a hostile
    coordinator cannot fill this process's memory. ``TimeoutExpired.output``: stdout so far."""
    kept: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
    overflow: set[int] = set()

    def drain(stream: IO[bytes], which: int) -> None:
        while chunk := stream.read(65536):
            room = _OUTPUT_LIMIT - len(kept[which])
            kept[which] += chunk[: max(room, 0)]
            if len(chunk) > room:
                overflow.add(which)

    with subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        readers = [
            threading.Thread(target=drain, args=(process.stdout, 1), daemon=True),
            threading.Thread(target=drain, args=(process.stderr, 2), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            for reader in readers:
                reader.join(5.0)
            raise subprocess.TimeoutExpired(argv, timeout, output=bytes(kept[1])) from None
        for reader in readers:
            reader.join(5.0)
    stdout = None if 1 in overflow else bytes(kept[1])
    return process.returncode, stdout, bytes(kept[2][-4096:])


def _last_line(text: str) -> str:
    """labgrid's one-line error, not its traceback."""
    lines = [line for line in text.splitlines() if line.strip()]
    useful = [line for line in lines if "Error" in line or "error" in line]
    return (useful or lines or ["(no output)"])[-1][-500:]
