"""The local transport's work_dir is the user's own (OpenSSH StrictModes-like checks).

A directory another user can write on the path to the agent lets that user plant a
library the agent loads (its RUNPATH starts with $ORIGIN), i.e. run code as whoever
runs the harness. These tests plant exactly that and check nothing of it runs.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.profiles.device_profile import load_profile
from harness.transport.local import LocalTransport
from harness.transport.private_dir import UnsafeDirectoryError, ensure_private_dir

OTHER_USER = "etdevice"


def _other_uid() -> int:
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    try:
        return pwd.getpwnam(OTHER_USER).pw_uid
    except KeyError:  # ssh-emu has not made its device user yet: any other uid will do
        return 65534


def _shared_tree(root: Path, uid: int) -> Path:
    """root/shared/host/agent/lib, all mode 0777 and owned by ``uid``, as the repro made."""
    lib = root / "shared" / "host" / "agent" / "lib"
    lib.mkdir(parents=True)
    for part in (root / "shared", *(root / "shared").rglob("*")):
        os.chown(part, uid, uid)
        part.chmod(0o777)
    return root / "shared" / "host"


def test_new_directories_are_0700_and_tmp_is_fine(tmp_path):
    target = tmp_path / "a" / "b"
    ensure_private_dir(target, "work_dir")
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    sticky = tmp_path / "sticky"
    sticky.mkdir(mode=0o1777)
    sticky.chmod(0o1777)  # as /tmp: sticky and root's (the tests run as root)
    if sticky.stat().st_uid == 0:
        ensure_private_dir(sticky / "work", "work_dir")  # below it: allowed
    with pytest.raises(
        UnsafeDirectoryError,
        match=r"^w.yaml: work_dir: /tmp is writable by "
        r"group \(mode 1777\), and the harness fills",
    ):
        ensure_private_dir(Path("/tmp"), "w.yaml: work_dir")  # the work dir itself: never


def test_a_directory_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky
    with pytest.raises(UnsafeDirectoryError, match=r"x.yaml: work_dir: .*shared is writable by"):
        ensure_private_dir(shared / "host", "x.yaml: work_dir")
    assert not (shared / "host").exists()


def test_a_directory_of_another_user_is_refused_even_if_sticky(tmp_path):
    uid = _other_uid()
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, uid, uid)
    shared.chmod(0o1777)  # sticky, but not root's
    with pytest.raises(UnsafeDirectoryError, match=rf"owned by uid {uid}"):
        ensure_private_dir(shared / "host", "work_dir")
    assert not (shared / "host").exists()


def test_a_link_of_another_user_is_refused(tmp_path):
    uid = _other_uid()
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(mine)
    os.lchown(link, uid, uid)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link owned by uid"):
        ensure_private_dir(link / "host", "work_dir")


def test_a_symlink_loop_is_one_line_naming_the_setting(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(UnsafeDirectoryError, match=rf"^p.yaml: work_dir: {loop}: its links"):
        ensure_private_dir(loop, "p.yaml: work_dir")


def test_push_into_a_shared_work_dir_is_refused(tmp_path):
    work = _shared_tree(tmp_path, _other_uid())
    transport = LocalTransport(str(work), "p.yaml: work_dir")
    src = tmp_path / "f"
    src.write_bytes(b"x")
    with pytest.raises(UnsafeDirectoryError, match=r"p.yaml: work_dir: .*owned by uid"):
        transport.push(src, str(work / "agent" / "x" / "f"))
    with pytest.raises(UnsafeDirectoryError):
        transport.facts()
    assert not (work / "agent" / "x").exists()


def test_doctor_on_a_planted_work_dir_runs_nothing(tmp_path):
    """The review's repro: a constructor library named libgcc_s.so.1 in work_dir/agent/lib."""
    work = _shared_tree(tmp_path, _other_uid())
    marker = tmp_path / "constructor-ran"
    source = tmp_path / "evil.c"
    source.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void f(void) {\n"
        f'  FILE *m = fopen("{marker}", "w"); if (m) fclose(m);\n}}\n'
    )
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-o",
            str(work / "agent" / "lib" / "libgcc_s.so.1"),
            str(source),
        ],
        check=True,
    )
    profile = tmp_path / "local.yaml"
    profile.write_text(f"transport: {{kind: local}}\nwork_dir: {work}\n")
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "doctor", "--device", str(profile)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(done.stdout, done.stderr)
    assert done.returncode == 1
    assert f"{profile}: work_dir: {work.parent} is owned by uid" in done.stdout
    assert not marker.exists()


def test_the_shipped_host_profile_works_in_a_directory_of_the_users_own(monkeypatch, tmp_path):
    monkeypatch.setenv("ET_HARNESS_CACHE", str(tmp_path / "cache"))
    assert load_profile("host").work_dir == str(tmp_path / "cache" / "host-work" / "host")
