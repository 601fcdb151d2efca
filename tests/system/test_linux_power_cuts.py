"""linux-emu's power cut (``LinuxEmulator.cut_power``: its QEMU SIGKILLed) at each moment of
issue #50's item 3, in a farm run: while the agent runs, while it is pushed, during a LOAD,
and just after the board took a pushed file's new name into its flash (the write the
harness relies on, docs/linux-emu.md "Power cuts in a run").

Each run is three tests; the first try of the second cuts the power at once (mid-test) or
arms the cut at its moment through a hook on the very step (paramiko's ``put`` and
``posix_rename``, the session channel's ``exchange``), so the cut falls there whatever the
timing. After the run: the tests passed, the second on its retry after one infrastructure
error, the others untouched; the board holds every file of the agent and the interrupted
test's program whole, and no staging file of a cut push. Each run boots the board two or
three times (seconds of a core each): marked nightly. The removal of what cut pushes leave
is also shown on ssh-emu, cheap enough for every run.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prerequisites import require
from run_environment import run_environment

from harness.devices.hosted import HostedDevice
from harness.emulators.linux import LinuxEmulator
from harness.profiles.device_profile import load_profile
from harness.runner import open_runner
from harness.shipped import devices_dir

CASES = '''\
import hashlib
import json
import posixpath
from pathlib import Path

import paramiko
import pytest

from harness.channel.stream_channel import StreamChannel
from harness.data.options import OptionsMap
from harness.programs.probe_program import probe_program
from harness.transport.base import Transport

HERE = Path(__file__).parent
MOMENT = "@MOMENT@"
PROBES = ("ProbeA", "ProbeB", "ProbeC")  # a program each: the second's is pushed in its test


def note(**facts):
    with open(HERE / "notes.jsonl", "a") as notes:
        notes.write(json.dumps(facts) + "\\n")


def on_board(device, script, *args):
    done = device.transport.run(["sh", "-c", script, "sh", *args], timeout=60)
    assert done.exit_code == 0, done
    return done.stdout.decode().strip()


def hook_once(owner, name, make):
    """owner.name replaced by make(original, undo) until the hook calls undo()."""
    original = getattr(owner, name)
    setattr(owner, name, make(original, lambda: setattr(owner, name, original)))


def cut(device, **facts):
    device.emulator.cut_power()
    note(moment=MOMENT, **facts)
    check = Transport.sha256_each

    def noted(transport, remotes, timeout=30.0):  # what the harness finds by digest after
        found = check(transport, remotes, timeout)
        note(moment="checked", found=dict(zip(remotes, found)))
        return found

    Transport.sha256_each = noted


def cut_mid_test(device):
    """The power goes while the agent runs, its registry set, its next request's program
    on the board: the session's next write finds the board gone."""
    device.program_for((PROBES[1],))
    cut(device)


def cut_while_the_agent_is_pushed(device):
    """The agent the bring-up pushed never reached the flash (a cut within the kernel's
    writeback delay): the power goes now; the health check after the board's restart pushes
    the agent, and the power goes again halfway through its biggest file, that half synced."""
    biggest = max(device.agent_build().deploy_files(), key=lambda f: f.stat().st_size)

    def make(put, undo):
        def put_cut_halfway(sftp, local, remote, callback=None, confirm=True):
            if posixpath.basename(local) != biggest.name:
                return put(sftp, local, remote, callback, confirm)
            undo()
            fired = []

            def halfway(done, total):
                if done >= total // 2 and not fired:
                    fired.append(done)
                    # what it holds now, all on the flash after the sync
                    script = 'held=$(stat -c %s "$1") && sync && echo "$held"'
                    on_flash = on_board(device, script, remote)
                    cut(device, staging=remote, on_flash=int(on_flash), whole=total)

            return put(sftp, local, remote, halfway, confirm)

        return put_cut_halfway

    hook_once(paramiko.SFTPClient, "put", make)
    on_board(device, 'rm -rf "$1" && sync', posixpath.dirname(device.deploy_agent()))
    device.emulator.cut_power()


def cut_during_a_load(device):
    """The power goes as soon as the LOAD request is written, its program pushed just
    before: the board is taking the request in or loading, and never answers it."""
    program = device.program_for((PROBES[1],))

    def make(exchange, undo):
        def exchange_cut(channel, message, seq, what="message"):
            if what != "LOAD":
                return exchange(channel, message, seq, what)
            undo()
            write = channel.stream.write

            def write_then_cut(data):
                write(data)
                cut(device, program=program)

            channel.stream.write = write_then_cut
            return exchange(channel, message, seq, what)

        return exchange_cut

    hook_once(StreamChannel, "exchange", make)


def cut_once_the_new_name_is_on_the_flash(device):
    """The board renamed a pushed program from its staging name and its kernel committed
    that to the flash's journal (as it does every 5 s), its data not yet written back (up
    to 30 s): the power goes; the harness had recorded the program as pushed."""

    def make(rename, undo):
        def rename_cut(sftp, old, new):
            rename(sftp, old, new)
            if "/programs/" in new:
                undo()
                on_board(device, 'sync "$(dirname "$1")"', new)  # fsync(2) of the folder
                cut(device, program=new)

        return rename_cut

    hook_once(paramiko.SFTPClient, "posix_rename", make)


ARM = {"mid-test": cut_mid_test, "agent-push": cut_while_the_agent_is_pushed,
       "load": cut_during_a_load, "rename": cut_once_the_new_name_is_on_the_flash}


def what_the_board_holds(device):
    agent_dir = posixpath.dirname(device.deploy_agent())
    files = [(f, posixpath.join(agent_dir, f.name)) for f in device.agent_build().deploy_files()]
    program = probe_program((PROBES[1],))  # the interrupted test's (not pushed here)
    files.append((program, posixpath.join(device.work_dir, "programs", program.name)))
    there = device.transport.sha256_each([remote for _, remote in files])
    wanted = {remote: hashlib.sha256(local.read_bytes()).hexdigest() for local, remote in files}
    staging = on_board(device, 'find "$1" -name ".*.et-*"', device.work_dir)
    return {"not_whole": [r for r, d in zip(wanted, there) if d != wanted[r]],
            "staging": staging.split(), "wanted": wanted}


@pytest.mark.parametrize("n", range(3))
def test_load(et, device, n):
    et.prepare([PROBES[n]])
    first_try = HERE / "cut"
    if n == 1 and not first_try.exists():
        first_try.write_text(MOMENT)
        ARM[MOMENT](device)
    et.load(OptionsMap.from_dict({PROBES[n]: {"k": n}})).raise_for_differences()
    if n == 2:
        note(moment="after", **what_the_board_holds(device))
'''


def _cut_run(tmp_path: Path, moment: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A farm run of :data:`CASES` on linux-emu, the cut at ``moment``: its records and the
    notes its tests wrote; the run went on and every test passed, the second on its retry
    after one infrastructure error, the others at their first try."""
    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    (tmp_path / "test_cases.py").write_text(CASES.replace("@MOMENT@", moment))
    results = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "test_cases.py", "-p", "no:cacheprovider",
         "--device", "linux-emu", "--infra-retries", "1", "--results-dir", str(results)],
        cwd=tmp_path, env=run_environment(), capture_output=True, text=True, timeout=900,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    records = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    assert [(r["nodeid"][-3:-1], r["outcome"]) for r in records] == [
        ("-0", "passed"), ("-1", "passed"), ("-2", "passed")
    ]  # fmt: skip
    # The board gone: the connection lost, or refused once the try connects again.
    (failed,) = [t.split(":")[0] for t in records[1]["failed_tries"]]
    assert failed in ("TransportLost", "DeviceUnavailable"), records[1]["failed_tries"]
    assert records[0]["failed_tries"] == [] and records[2]["failed_tries"] == []
    notes = [json.loads(line) for line in (tmp_path / "notes.jsonl").read_text().splitlines()]
    (after,) = [n for n in notes if n["moment"] == "after"]
    # The board holds the agent and the interrupted test's program whole, and no push's
    # staging file.
    assert after["not_whole"] == [] and after["staging"] == [], after
    return records, notes


def _the(notes: list[dict[str, Any]], moment: str) -> dict[str, Any]:
    (note,) = [n for n in notes if n["moment"] == moment]
    return note


@pytest.mark.nightly
def test_a_power_cut_mid_test_is_retried_once_as_infra_and_the_run_goes_on(tmp_path: Path):
    records, _ = _cut_run(tmp_path, "mid-test")
    cut = records[1]
    assert [t.split(":")[0] for t in cut["failed_tries"]] == ["TransportLost"]
    assert len(cut["emulator_restarts"]) == 1  # a boot
    # The board's console up to the cut is the lost try's artifact.
    consoles = [a for a in cut["artifacts"] if a.endswith("console.log")]
    console = tmp_path / "results" / consoles[0]
    assert len(consoles) == 1 and "login:" in console.read_text(errors="replace")


@pytest.mark.nightly
def test_a_power_cut_while_the_agent_is_pushed_leaves_a_half_the_board_drops_after(
    tmp_path: Path,
):
    records, notes = _cut_run(tmp_path, "agent-push")
    cut = _the(notes, "agent-push")
    # The flash held part of the agent's biggest file, synced, under its staging name.
    assert 0 < cut["on_flash"] < cut["whole"], cut
    # The board was restarted twice: after the cut mid-test, and after the one mid-push,
    # which failed the health check that pushed the agent again.
    first, second = records[1]["emulator_restarts"]
    assert first.startswith("restart 1 of 2: the health check before a retry failed: ")
    name = cut["staging"].rsplit("/.", 1)[1].split(".et-")[0]
    assert second.startswith("restart 2 of 2: the health check after emulator restart 1 ")
    assert "TransportLost: ssh linux-emu: connection lost while pushing " in second
    assert f"/{name} to " in second, second


@pytest.mark.nightly
def test_a_power_cut_during_a_load_is_retried_once_and_the_program_is_whole_after(
    tmp_path: Path,
):
    records, notes = _cut_run(tmp_path, "load")
    cut = _the(notes, "load")
    # The LOAD was written and its report never came: the try failed reading it.
    assert ": reading: " in records[1]["failed_tries"][0], records[1]["failed_tries"]
    assert len(records[1]["emulator_restarts"]) == 1
    # The harness checked the program again by its digest before it loaded it again.
    assert any(cut["program"] in n["found"] for n in notes if n["moment"] == "checked")


@pytest.mark.nightly
def test_a_power_cut_once_a_pushed_name_reached_the_flash_pushes_the_file_again(
    tmp_path: Path,
):
    records, notes = _cut_run(tmp_path, "rename")
    program = _the(notes, "rename")["program"]
    wanted = _the(notes, "after")["wanted"][program]
    # Back on, the harness found the name on the flash but not the file (empty: its data
    # had not been written back) by its digest, and pushed it again: it is whole after.
    (found, *_) = [n["found"][program] for n in notes if program in n.get("found", {})]
    assert found == hashlib.sha256(b"").hexdigest() != wanted
    assert len(records[1]["emulator_restarts"]) == 1


def test_after_a_restart_the_first_push_removes_the_staging_files_of_cut_pushes():
    """What a push cut short leaves (``.NAME.et-XXXXXXXX`` beside NAME, see
    test_a_power_cut_while_the_agent_is_pushed_leaves_a_half_the_board_drops_after) is
    removed once the emulator is back, and nothing else of the work directory."""
    require("/usr/sbin/sshd", root=True)
    device, runner = open_runner(load_profile(str(devices_dir() / "ssh-emu.yaml")))
    try:
        assert isinstance(device, HostedDevice)
        runner.close()
        agent, programs = device.deploy_agent().rsplit("/", 1)[0], f"{device.work_dir}/programs"
        left = {f"{agent}/.et-agent.et-0f826e11", f"{programs}/.p.pte.et-1a2b3c4d"}
        kept = {f"{agent}/.et-agent.et-short", f"{programs}/p.pte.et-1a2b3c4d"}
        made = device.transport.run(
            ["sh", "-c", 'mkdir -p "$1" && shift && touch "$@"', "sh", programs, *left, *kept],
            timeout=30,
        )
        assert made.exit_code == 0, made
        device.restart_emulator()  # as the farm does when a device is lost
        device.deploy_agent()
        listed = device.transport.run(["find", agent, programs, "-type", "f"], timeout=30)
        there = set(listed.stdout.decode().split())
        assert there & left == set() and kept <= there, there
    finally:
        runner.close()
        device.close()


@pytest.mark.nightly
def test_a_file_the_harness_pushed_survives_a_power_cut_right_after(tmp_path: Path):
    """A push counts as done only once the board wrote the file through to its flash: a
    power cut the moment it returns leaves the file whole, found by nothing but its name
    (without the write-through the board still held it in its page cache: lost)."""
    require("qemu-system-aarch64", "ssh-keygen", "mke2fs", "dpkg-deb")
    device, runner = open_runner(load_profile(str(devices_dir() / "linux-emu.yaml")))
    try:
        assert isinstance(device, HostedDevice) and isinstance(device.emulator, LinuxEmulator)
        runner.close()
        local = tmp_path / "payload.bin"
        local.write_bytes(hashlib.sha256(b"seed").digest() * (64 << 10))  # 2 MB
        remote = f"{device.work_dir}/payload.bin"
        device.push_once(local, remote)
        device.emulator.cut_power()
        device.emulator.start()
        device.transport.close()
        (there,) = device.transport.sha256_each([remote])
        assert there == hashlib.sha256(local.read_bytes()).hexdigest()
    finally:
        runner.close()
        device.close()
