"""Whatever the harness starts, it stops: even when it is interrupted or killed.

- :mod:`.process`: child processes started with a clean signal state, in a process
  group of their own, marked as this process's (:class:`ManagedProcess` for the
  long-lived ones: stderr tail, wait for a line, terminate-then-kill).
- :mod:`.owner`: this process's ownership record (a small state file naming its
  children, network namespaces and files) and its janitor, a watchdog process that
  removes all of it when this process is gone, however it ended.
- :mod:`.reap`: the removal itself, also applied by the next run to records whose
  owner and janitor are both dead.
- :mod:`.signals`: SIGTERM handled as an orderly shutdown.

See docs/lifecycle.md.
"""
