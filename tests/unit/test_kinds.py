"""Device kinds: one module each, one vocabulary, and kinds from other packages."""

from __future__ import annotations

import importlib
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.profiles.device_profile import ProfileError, parse_profile
from harness.profiles.kinds import (
    RENAMED_EMULATORS,
    UnknownKind,
    all_kinds,
    device_kind,
    kind_module,
    kind_names,
)

HARNESS = Path(__file__).resolve().parents[2] / "harness"


def test_every_kind_names_its_settings_and_emulator_alike():
    """``<Kind>Settings``; emulator ``<name>-emu`` is ``harness.emulators.<name>``'s
    ``<Name>Emulator``."""
    for kind in all_kinds():
        if kind.settings is not None:
            assert kind.settings.__name__ == f"{kind.name.capitalize()}Settings", kind.name
        if kind.emulator is not None:
            stem = kind.emulator.removesuffix("-emu")
            assert kind.emulator == f"{stem}-emu"
            module = importlib.import_module(f"harness.emulators.{stem}")
            assert hasattr(module, f"{stem.capitalize()}Emulator"), kind.emulator


def test_no_two_modules_differ_by_one_letter():
    names = {
        p.stem if p.suffix else p.name
        for p in HARNESS.rglob("*")
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }

    def one_apart(a: str, b: str) -> bool:
        if len(a) == len(b):
            return sum(x != y for x, y in zip(a, b, strict=True)) == 1
        short, long = sorted((a, b), key=len)
        return len(long) == len(short) + 1 and any(
            long[:i] + long[i + 1 :] == short for i in range(len(long))
        )

    close = [(a, b) for a, b in itertools.combinations(sorted(names), 2) if one_apart(a, b)]
    assert not close


def test_an_unknown_kind_is_refused_with_the_kinds_there_are():
    there_are = ", ".join(kind_names())
    for bad in ("nosuch", "bring_up", "../x", ["ssh"]):
        with pytest.raises(ProfileError) as refused:
            parse_profile({"transport": {"kind": bad}}, None, "board")
        assert str(refused.value).endswith(f" is not one of {there_are}")
        assert str(refused.value).startswith("board: transport.kind: ")


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED_EMULATORS.items()))
def test_an_old_emulator_name_still_works_with_a_deprecation_note(old, new):
    assert sorted(RENAMED_EMULATORS) == ["adbd", "qemu-mcu", "sshd"]  # what profiles said
    kind = next(k.name for k in all_kinds() if k.emulator == new)
    with pytest.warns(FutureWarning, match=f"board: emulator: {old} is now called {new}; write"):
        profile = parse_profile({"transport": {"kind": kind}, "emulator": old}, None, "board")
    assert profile.emulator == new


# A kind from another package: its module, and a dist-info naming it under the group.
OUT_OF_TREE_KIND = '''
"""A test kind from outside the harness: this machine, greeting on request."""
from dataclasses import dataclass

from harness.profiles.kinds import DeviceKind
from harness.profiles.validator import parse_settings
from harness.devices.host_tools import HostTool
from harness.devices.hosted import HostedDevice
from harness.transport.local import LocalTransport


@dataclass(frozen=True)
class GreeterSettings:
    greeting: str = "hello"


def settings(profile):
    return parse_settings(
        GreeterSettings, profile.settings, profile.where("transport"), fields={"greeting": None}
    )


def check_settings(profile):
    settings(profile)


def host_tools(profile):
    return (HostTool("echo", "coreutils", "greets"),)


def open_device(profile, context):
    device = HostedDevice(
        profile, LocalTransport(profile.work_dir, profile.where("work_dir")), context.resources
    )
    device.greeting = settings(profile).greeting
    return device


KIND = DeviceKind(name="greeter", settings=GreeterSettings, on_this_machine=True)
'''

OPEN_IT = """
import json, sys
from harness.profiles.kinds import kind_names
from harness.profiles.device_profile import ProfileError, load_profile
from harness.devices.bring_up import check_transport_settings, open_device

device = open_device(load_profile(sys.argv[1]))
try:
    result = device.transport.run(["echo", device.greeting], timeout=30)
finally:
    device.close()
try:
    check_transport_settings(load_profile(sys.argv[2]))
    refusal = None
except ProfileError as exc:
    refusal = str(exc)
print(json.dumps([kind_names(), type(device).__name__, result.stdout.decode(), refusal]))
"""


def test_a_kind_from_another_package_registers_through_its_entry_point(tmp_path):
    site = tmp_path / "site"
    (site / "greeter_kind-0.1.dist-info").mkdir(parents=True)
    (site / "greeter_kind.py").write_text(OUT_OF_TREE_KIND)
    (site / "greeter_kind-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: greeter-kind\nVersion: 0.1\n"
    )
    (site / "greeter_kind-0.1.dist-info" / "entry_points.txt").write_text(
        "[et_harness.device_kinds]\ngreeter = greeter_kind\n"
    )
    good, bad = tmp_path / "greeter.yaml", tmp_path / "bad.yaml"
    work = tmp_path / "work"
    good.write_text(f"transport: {{kind: greeter, greeting: bonjour}}\nwork_dir: {work}\n")
    bad.write_text(f"transport: {{kind: greeter, colour: red}}\nwork_dir: {work}\n")
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(OPEN_IT), str(good), str(bad)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    names, device_type, echoed, refusal = json.loads(out.splitlines()[-1])
    assert "greeter" in names and {"local", "ssh", "adb", "serial"} <= set(names)
    assert device_type == "HostedDevice"
    assert echoed == "bonjour\n"
    assert refusal == f"{bad}: transport.colour: unknown field; allowed: greeting"


def test_without_its_package_the_kind_is_unknown():
    assert "greeter" not in kind_names()
    with pytest.raises(UnknownKind, match="is not one of"):
        device_kind("greeter")
    with pytest.raises(UnknownKind):
        kind_module("greeter")
