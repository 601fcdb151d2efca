"""Profiles whose device is this machine run their agent fields here: only trusted ones may.

The review's repro: an ssh-emu profile's wrapper ``sh -c 'id > /tmp/x; ...'`` ran on
this machine (as the emulated device's user). Such a profile from outside ``devices/``
is refused when read, before anything starts, unless the user lists it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.profiles.device_profile import ProfileError, load_profile
from harness.untrusted.trust import TRUSTED_PROFILES_ENV, listed_by_user, profile_is_trusted

THIS_MACHINE = {
    "local": "transport: {kind: local}\n",
    "ssh-emu": "transport: {kind: ssh}\nemulator: ssh-emu\n",
    "adb-emu": "transport: {kind: adb}\nemulator: adb-emu\n",
    "mcu-emu": "transport: {kind: serial}\nemulator: mcu-emu\n",
}


def _write(tmp_path: Path, body: str, agent: str) -> Path:
    path = tmp_path / "lab" / "x.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"{body}agent: {agent}\n")
    return path


@pytest.mark.parametrize("device", THIS_MACHINE)
@pytest.mark.parametrize(
    "agent, field",
    [
        ("{wrapper: [sh, -c, 'id > /tmp/x; exec \"$0\"']}", "agent.wrapper"),
        ("{env: {LD_PRELOAD: /tmp/evil.so}}", "agent.env"),
        ("{prebuilt: dist}", "agent.prebuilt"),
    ],
)
def test_untrusted_profiles_for_this_machine_may_not_run_things(
    tmp_path, monkeypatch, device, agent, field
):
    monkeypatch.delenv(TRUSTED_PROFILES_ENV, raising=False)
    path = _write(tmp_path, THIS_MACHINE[device], agent)
    with pytest.raises(ProfileError) as refused:
        load_profile(str(path))
    message = str(refused.value)
    assert message.startswith(f"{path}: {field}: this device is this machine")
    assert f"add it (or its directory) to {TRUSTED_PROFILES_ENV}" in message
    assert "\n" not in message


@pytest.mark.parametrize("listed", ["file", "dir"])
def test_the_user_can_trust_a_file_or_a_directory(tmp_path, monkeypatch, listed):
    path = _write(tmp_path, THIS_MACHINE["ssh-emu"], "{wrapper: [valgrind]}")
    entry = path if listed == "file" else path.parent
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, f"/nonexistent{os.pathsep}{entry}")
    assert load_profile(str(path)).agent.wrapper == ("valgrind",)


def test_remote_devices_keep_their_agent_fields(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUSTED_PROFILES_ENV, raising=False)
    path = _write(tmp_path, "transport: {kind: ssh, host: board}\n", "{wrapper: [valgrind]}")
    assert load_profile(str(path)).agent.wrapper == ("valgrind",)


def test_shipped_profiles_are_trusted_and_look_alikes_are_not(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUSTED_PROFILES_ENV, raising=False)
    assert load_profile("ssh-emu").agent.wrapper[0] == "qemu-aarch64"
    assert not profile_is_trusted(None)  # handed over without a file (a lab coordinator)
    lookalike = tmp_path / "devices"
    lookalike.mkdir()
    (lookalike / "ssh-emu.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    assert not profile_is_trusted(lookalike / "ssh-emu.yaml")
    monkeypatch.setenv("X_LIST", str(tmp_path / "a"))
    assert not listed_by_user(tmp_path / "ab" / "x.yaml", "X_LIST")  # a prefix, not a parent
    assert listed_by_user(tmp_path / "a" / "x.yaml", "X_LIST")


def test_devices_listing_names_the_untrusted_field_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    path = _write(tmp_path, THIS_MACHINE["ssh-emu"], f"{{wrapper: [touch, '{marker}']}}")
    env = {k: v for k, v in os.environ.items() if k != TRUSTED_PROFILES_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "doctor", "--device", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    print(done.stdout, done.stderr)
    assert done.returncode != 0
    assert f"{path}: agent.wrapper: this device is this machine" in done.stdout + done.stderr
    assert not marker.exists()
