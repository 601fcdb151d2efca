"""What the OS must provide: a device whose programs on this machine are missing fails
when it is opened, in one line naming the program and its Debian package, before
anything starts; ``et-harness doctor`` lists every program (harness/devices/host_tools.py).

PATH is narrowed to a folder of links to the machine's own programs, one left out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.devices.bring_up import needed_host_tools as host_tools
from harness.devices.bring_up import open_device
from harness.devices.host_tools import MissingHostTool, check_host_tools
from harness.profiles.device_profile import load_profile

DEVICES = ("host", "ssh-emu", "adb-emu", "mcu-emu", "host-helgrind")


def _path_without(tmp_path: Path, left_out: str) -> str:
    """A PATH of links to every program these devices need but ``left_out`` (and to
    what the harness itself runs, the Python interpreter's folder first)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in DEVICES:
        for tool in host_tools(load_profile(name)):
            found = shutil.which(tool.command)
            link = folder / Path(tool.command).name
            if tool.command != left_out and found and not link.exists():
                link.symlink_to(found)
    return os.pathsep.join([str(Path(sys.executable).parent), str(folder)])


def test_every_device_needs_what_it_runs() -> None:
    needs = {name: {t.command for t in host_tools(load_profile(name))} for name in DEVICES}
    assert needs["host"] == {"g++", "make"}
    assert {"aarch64-linux-gnu-g++", "qemu-aarch64", "/usr/sbin/sshd", "socat"} <= needs["ssh-emu"]
    assert {"adb", "qemu-aarch64", "aarch64-linux-gnu-g++"} <= needs["adb-emu"]
    assert needs["mcu-emu"] == {"qemu-system-arm", "arm-none-eabi-gcc", "arm-none-eabi-g++"}
    assert "valgrind" in needs["host-helgrind"] and "valgrind" not in needs["host"]


@pytest.mark.parametrize(
    ("device", "left_out", "package"),
    [
        ("ssh-emu", "qemu-aarch64", "qemu-user"),
        ("adb-emu", "adb", "adb"),
        ("mcu-emu", "qemu-system-arm", "qemu-system-arm"),
        ("host", "g++", "g++"),
    ],
)
def test_a_missing_program_fails_the_device_in_one_line_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, device: str, left_out: str, package: str
) -> None:
    monkeypatch.setenv("PATH", _path_without(tmp_path, left_out))
    with pytest.raises(MissingHostTool) as missing:
        open_device(load_profile(device))
    said = str(missing.value)
    assert said.startswith(f"{device}: {left_out} (") and "\n" not in said
    assert said.endswith(f"is not on PATH; install Debian's {package} (apt-get install {package})")


def test_doctor_lists_every_program_and_fails_the_device_that_lacks_one(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_without(tmp_path, "qemu-aarch64")}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "doctor", "--device", "ssh-emu,mcu-emu"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    qemu = next(line for line in lines if line.split()[:1] == ["qemu-aarch64"])
    assert qemu.split()[1:4] == ["MISSING", "Debian", "qemu-user"] and qemu.endswith(": ssh-emu")
    system = next(line for line in lines if line.split()[:1] == ["qemu-system-arm"])
    assert system.split()[1] == "ok" and system.endswith(": mcu-emu")
    (ssh_emu,) = [line for line in lines if line.startswith("ssh-emu ")]
    assert "UNAVAILABLE" in ssh_emu, done.stdout
    assert "install Debian's qemu-user (apt-get install qemu-user)" in ssh_emu
    (mcu_emu,) = [line for line in lines if line.startswith("mcu-emu ")]
    assert mcu_emu.split()[1] == "ok", done.stdout


def test_a_program_the_device_can_do_without_is_listed_not_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without socat ssh-emu listens on loopback (its isolation ``auto``): not a failure."""
    (socat,) = [t for t in host_tools(load_profile("ssh-emu")) if t.command == "socat"]
    assert socat.without == "listens on loopback"
    monkeypatch.setenv("PATH", _path_without(tmp_path, "socat"))
    check_host_tools(load_profile("ssh-emu"), host_tools(load_profile("ssh-emu")))  # no error
