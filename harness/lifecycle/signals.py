"""Signal state: what children start with, and SIGTERM as an orderly shutdown."""

from __future__ import annotations

import os
import select
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType

# coreutils' env (8.31 or later): ``--default-signal`` without a name sets every
# signal's disposition to the default and unblocks it, then execs the command.
_ENV_PROGRAM = "/usr/bin/env"
# What the command runs through when its first word holds "=" (env would take that for
# a variable assignment): a shell that execs its arguments, built from no input.
_EXEC_ARGUMENTS = ("/bin/sh", "-c", 'exec "$0" "$@"')


def with_default_signals(argv: Sequence[str]) -> list[str]:
    """``argv`` made to start with nothing blocked and default dispositions.

    SIG_IGN and the signal mask survive exec: a harness run as a background job
    (SIGINT ignored) or under nohup, or one that blocks SIGINT and SIGTERM to wait for
    them, would pass that on. Python 3.11's subprocess can reset them only through
    ``preexec_fn``, which runs Python code (and the at-fork hooks) in the forked child
    of a process with threads; with a gRPC client's threads running that crashes
    (docs/lifecycle.md, "Starting a child"). So the reset is done after the fork by a
    program: env, exec'd by subprocess's C code, which runs no Python in the child.
    """
    if not argv:
        raise ValueError("an empty command: name the program to start")
    if "=" in argv[0]:
        return [_ENV_PROGRAM, "--default-signal", *_EXEC_ARGUMENTS, *argv]
    return [_ENV_PROGRAM, "--default-signal", *argv]


def stop_on_sigterm(stop: Callable[[], None]) -> None:
    """Call ``stop`` (which should raise) in the main thread on the first SIGTERM.

    Later SIGTERMs are ignored, so the teardown the first one started is not cut
    short; SIGKILL still ends the process, and the janitor cleans up after it.
    """

    if threading.current_thread() is not threading.main_thread():
        return  # Python runs handlers in the main thread only; it can be installed there only

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop()

    signal.signal(signal.SIGTERM, handler)


def sigterm_when_orphaned() -> None:
    """Send this process SIGTERM as soon as its parent process is gone.

    For pytest-xdist workers: when the controller is SIGKILLed, a worker would
    otherwise learn of it only through execnet, which interrupts it after about 5 s.
    """
    parent = os.getppid()
    try:
        handle = os.pidfd_open(parent)
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGTERM)  # gone already
        return
    except OSError:
        return  # a kernel without pidfds (before 5.3): execnet's own 5 s then apply

    def watch() -> None:
        select.select([handle], [], [])  # readable once the parent has exited
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()
