"""A real PostgreSQL server for the tests: Debian's binaries, a cluster in a temporary
directory, listening on a unix socket only, stopped and removed afterwards.

The server refuses to run as root, so under root the cluster belongs to Debian's
``postgres`` user and the server runs as that user; as anyone else, as them. The change of
user is util-linux's ``setpriv`` in the argv, not ``Popen(user=...)``: that makes CPython
fork instead of vfork, and a forked child of an xdist worker that has loaded labgrid's gRPC
runs gRPC's at-fork handler, which can kill it before it execs (seen once in eight runs:
"postgres exited" with only a gRPC "epoll_wait error: Bad file descriptor").
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_READY_TIMEOUT_S = 60


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        pytest.fail("PostgreSQL not found: run `bash ci/setup.sh` (Debian's postgresql package)")
    return Path(found[-1]).parent


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server; yield the URL of an empty database ``history`` on it."""
    import psycopg

    bin_dir = _bin_dir()
    user = "postgres" if os.geteuid() == 0 else None
    as_user = (
        []
        if user is None
        else ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
    )
    base = Path(tempfile.mkdtemp(prefix="et-history-pg-"))
    server: subprocess.Popen[bytes] | None = None
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(base, entry.pw_uid, entry.pw_gid)
        data, socket_dir = base / "data", base
        subprocess.run(
            [
                *as_user,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "et",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        server = subprocess.Popen(
            [
                *as_user,
                str(bin_dir / "postgres"),
                "-D",
                str(data),
                "-k",
                str(socket_dir),
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=40",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        conninfo = f"host={socket_dir} port=5432 user=et dbname=postgres"
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while True:  # ready when it accepts a connection (it says so on no other channel)
            if server.poll() is not None:
                assert server.stderr is not None  # a pipe
                pytest.fail(f"postgres exited: {server.stderr.read().decode()[-2000:]}")
            try:
                with psycopg.connect(conninfo, autocommit=True, connect_timeout=2) as conn:
                    conn.execute("CREATE DATABASE history")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"postgresql://et@/history?host={socket_dir}&port=5432"
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)  # fast shutdown: ends its sessions
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            if server.stderr is not None:
                server.stderr.close()
        shutil.rmtree(base, ignore_errors=True)
