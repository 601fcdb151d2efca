"""Signal state: what children start with, and SIGTERM as an orderly shutdown."""

from __future__ import annotations

import os
import select
import signal
import threading
from collections.abc import Callable
from types import FrameType

# Dispositions a child must not inherit: SIG_IGN survives exec, so a harness started
# as a background job (SIGINT ignored) or under nohup would pass that on.
_RESET_IN_CHILD = (
    signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE,
    signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGCHLD,
)  # fmt: skip


def reset_in_child() -> None:
    """``preexec_fn``: nothing blocked, default dispositions (runs in the forked child).

    Python 3.11's subprocess has no parameter for either. It only sets the signal
    mask and dispositions, taking no lock, so it is safe in a process with threads.
    """
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for signum in _RESET_IN_CHILD:
        signal.signal(signum, signal.SIG_DFL)


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
