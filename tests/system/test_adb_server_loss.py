"""Nothing adb starts outlives the run (issue #24, fault 3), and adb-emu restarts whole
(issue #37, fault 5).

adb-emu's private adb server is killed in the middle of a run; the adb client would
fork a new one on the next call (``adb -L tcp:PORT fork-server server``), in the
background and unrecorded. The harness restarts the emulated phone instead, its server
on the same port with it, and the run goes on with every test passing. After the run no
adb server may run on that port. And a record's sweep finds an adb server on a port the
harness used, whoever started it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from prerequisites import require
from run_environment import run_environment

CASES = """\
import os
import signal
from pathlib import Path

import pytest

from harness.data.options import OptionsMap


def adb_servers_on(port):
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                words = (entry / "cmdline").read_bytes().split(b"\\0")
            except OSError:
                continue
            if words[0].endswith(b"adb") and b"server" in words and port.encode() in words:
                yield int(entry.name)


@pytest.mark.parametrize("n", range(5))
def test_set(et, device, n):
    et.prepare(["ProbeA"])  # the agent runs
    if n == 2 and not Path({port_file!r}).exists():  # once: its retry finds it dead
        port = str(device.profile.settings["server_port"])
        Path({port_file!r}).write_text(port)
        for pid in adb_servers_on(port):
            os.kill(pid, signal.SIGKILL)
    et.set(OptionsMap.from_dict({{"ProbeA": {{"k": n}}}})).raise_for_differences()
"""


def _adb_processes_on(port: str) -> list[str]:
    """Every adb process that names ``port`` (a server, or a client still running)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if os.path.basename(words[0]) == "adb" and any(port in w for w in words):
                found.append(f"{entry.name}: {' '.join(words)}")
    return found


@pytest.mark.slow
def test_a_killed_private_adb_server_comes_back_with_its_phone_and_nothing_outlives_the_run(
    tmp_path,
):
    require("adb", "qemu-aarch64")
    port_file = tmp_path / "adb-port"
    (tmp_path / "test_cases.py").write_text(CASES.format(port_file=str(port_file)))
    results = tmp_path / "results"
    env = run_environment()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_cases.py",
            "-p",
            "no:cacheprovider",
            "--device",
            "adb-emu",
            "--infra-retries",
            "1",
            "--lock-dir",
            str(tmp_path / "locks"),
            "--results-dir",
            str(results),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "INTERNALERROR" not in run.stdout + run.stderr, run.stdout + run.stderr
    port = port_file.read_text()
    assert _adb_processes_on(port) == [], run.stdout  # at once, not after a janitor's grace
    outcomes = {}
    for line in (results / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        outcomes[record["nodeid"].rsplit("-", 1)[1].rstrip("]")] = record["outcome"]
    # The server is part of the emulated phone: restarted with it, the run goes on.
    assert outcomes == dict.fromkeys("01234", "passed"), run.stdout
    restarts = [
        json.loads(line).get("emulator_restarts")
        for line in (results / "results.jsonl").read_text().splitlines()
    ]
    assert sum(len(r or []) for r in restarts) == 1, restarts


def test_the_sweep_ends_an_adb_server_on_a_port_the_harness_used(tmp_path):
    """A server forked by an adb client is in no process group the record names and carries
    no marker: the record's port finds it."""
    require("adb")
    from harness.emulators.adb.server import free_port
    from harness.lifecycle.reap import OwnerRecord, adb_servers, boot_id, reap

    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path)}
    subprocess.run(
        ["adb", "-P", str(port), "start-server"],
        env=env,
        capture_output=True,
        check=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    forked = adb_servers({port})
    try:
        assert len(forked) == 1, _adb_processes_on(str(port))
        record = OwnerRecord(
            "gone-owner", pid=1, start=0, boot_id=boot_id(), host="h", adb_ports=(port,)
        )
        reap(OwnerRecord.from_json(record.to_json()))  # as the sweep reads it back
        assert adb_servers({port}) == set()
        assert _adb_processes_on(str(port)) == []
    finally:
        for pid in adb_servers({port}):
            os.kill(pid, signal.SIGKILL)
