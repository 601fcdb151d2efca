"""Child processes the harness starts, and how they end.

Every child gets a clean signal state (nothing blocked, default dispositions: a
harness that blocks SIGTERM, or runs as a background job with SIGINT ignored, does
not pass that on; set by exec'ing through env, so that no Python code runs between
fork and exec: :func:`harness.lifecycle.signals.with_default_signals`), a session
and process group of its own (a Ctrl-C at the terminal reaches the harness, which
then stops its children in order), and this process's
owner marker (:mod:`harness.lifecycle.owner`), so that its janitor can end it if
the harness dies first.

- :func:`popen` / :func:`run`: the spawn, for callers that handle the pipes;
- :class:`ManagedProcess`: a long-lived child (an emulator, a stream's client):
  recorded in the ownership record, its stderr read into a bounded tail
  (:mod:`harness.lifecycle.stderr_tail`, optionally copied to a log file) that
  callers can wait on, stopped with
  SIGTERM to its process group, then SIGKILL after a short grace;
- :func:`on_free_port`: start a listening child on a free port, retrying when
  another process takes the port first.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable, Container, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

from harness.lifecycle import owner
from harness.lifecycle.signals import with_default_signals
from harness.lifecycle.stderr_tail import TAIL_LINES, StderrTail

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL

Stdio = int | IO[Any] | None


def popen(
    argv: Sequence[str],
    *,
    stdin: Stdio = DEVNULL,
    stdout: Stdio = DEVNULL,
    stderr: Stdio = DEVNULL,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` (see the module docstring); ``env`` None means this environment.

    A program that cannot be started raises :class:`FileNotFoundError` or
    :class:`PermissionError` here, as :class:`subprocess.Popen` would: env, which
    starts it, would only exit with status 127 or 126.
    """
    marked = {**(os.environ if env is None else env), **owner.current().marker}
    _check_program(argv[0] if argv else "", marked.get("PATH", os.defpath), cwd)
    return subprocess.Popen(
        with_default_signals(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=marked,
        cwd=cwd, start_new_session=True,
    )  # fmt: skip


def _check_program(program: str, path: str, cwd: Path | str | None) -> None:
    """Raise the :class:`OSError` :class:`subprocess.Popen` would unless ``program``
    is an executable file (looked up in ``path`` without a slash, in ``cwd`` with one)."""
    where = os.path.join(cwd, program) if "/" in program and cwd is not None else program
    if shutil.which(where, path=path) is None:
        found = shutil.which(where, mode=os.F_OK, path=path) is not None
        error = errno.EACCES if found else errno.ENOENT
        raise OSError(error, os.strerror(error), program)  # PermissionError, FileNotFoundError


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` to its end with captured output, like :func:`subprocess.run`.

    On timeout the child's whole process group is killed (not only the child) and
    :class:`subprocess.TimeoutExpired` raised.
    """
    process = popen(
        argv, stdin=PIPE if input is not None else DEVNULL, stdout=PIPE, stderr=PIPE,
        env=env, cwd=cwd,
    )  # fmt: skip
    try:
        out, err = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.communicate()
        raise
    except BaseException:
        _signal_group(process, signal.SIGKILL)
        process.wait()
        raise
    return subprocess.CompletedProcess(list(argv), process.returncode, out, err)


class ManagedProcess:
    """A long-lived child (see the module docstring); started on construction.

    ``stderr``: PIPE (read into the tail, and appended to ``log`` if given), a file,
    or DEVNULL. ``keep_lines`` bounds how many stderr lines :meth:`stderr_count`
    and :meth:`wait_for_stderr` can see; :meth:`stderr_tail` shows the last 40.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str,
        stdin: Stdio = DEVNULL,
        stdout: Stdio = DEVNULL,
        stderr: Stdio = PIPE,
        log: Path | None = None,
        keep_lines: int = TAIL_LINES,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.popen = popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, env=env)
        owner.current().add_process(self.popen.pid, name)
        self._log = log.open("ab") if log is not None and self.popen.stderr is not None else None
        self._stderr: StderrTail | None = None
        if self.popen.stderr is not None:
            stream = cast(io.BufferedReader, self.popen.stderr)  # Popen's default buffering
            self._stderr = StderrTail(
                lambda: stream.read1(65536), name=name, keep_lines=keep_lines, log=self._log
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        """The exit status, or None while it runs."""
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        """The exit status once it ends; :class:`subprocess.TimeoutExpired` after ``timeout``."""
        return self.popen.wait(timeout)

    def stderr_tail(self) -> str:
        """The last lines of stderr."""
        return self._stderr.text() if self._stderr is not None else ""

    def stderr_count(self, text: str) -> int:
        """How many kept stderr lines contain ``text``."""
        return self._stderr.count(text) if self._stderr is not None else 0

    def wait_for_stderr(self, text: str, count: int = 1, timeout: float = 5.0) -> bool:
        """Whether ``count`` stderr lines containing ``text`` arrived within ``timeout``;
        False as soon as stderr has ended without them (the child and its children exited)."""
        return self._stderr is not None and self._stderr.wait_for(text, count, timeout)

    def wait_for_stderr_end(self, timeout: float) -> bool:
        """Whether stderr has ended (the child and its children closed it) within ``timeout``."""
        return self._stderr is None or self._stderr.wait_for_end(timeout)

    def kill(self) -> None:
        """SIGKILL the child's process group, as a crash would, and reap the child."""
        _signal_group(self.popen, signal.SIGKILL)
        self.popen.wait()

    def stop(self, grace: float = STOP_GRACE, *, terminate: bool = True) -> int | None:
        """End the child: SIGTERM its group (unless ``terminate`` is False: then it is
        expected to end by itself, e.g. on end of input), SIGKILL it after ``grace``.
        Returns the exit status; safe to call twice."""
        if self.popen.poll() is None:
            if terminate:
                _signal_group(self.popen, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._stderr is not None:
            self._stderr.join(grace)
        for pipe in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        owner.current().remove_process(self.popen.pid)
        return self.popen.returncode


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """Signal the process group ``process`` leads, while its PID is still ours.

    Until the leader is reaped its PID, and so its group id, cannot be reused.
    """
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)


def free_port(host: str = "127.0.0.1", avoid: Container[int] = ()) -> int:
    """A TCP port on ``host`` that is free now (another process may take it before use)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
        if port not in avoid:
            return port


def on_free_port(
    launch: Callable[[int], bool], *, attempts: int = 5, host: str = "127.0.0.1",
    avoid: Container[int] = (),
) -> int | None:  # fmt: skip
    """Call ``launch(port)`` with free ports until it returns True (it listens there);
    False means the port was taken meanwhile. The port, or None after ``attempts``."""
    for _ in range(attempts):
        port = free_port(host, avoid)
        if launch(port):
            return port
    return None
