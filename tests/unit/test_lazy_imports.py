"""The pytest plugin loads no transport, link or emulator until a device of that kind is used."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest

from harness.profiles.kinds import (
    ENTRY_POINT_GROUP,
    all_kinds,
    emulators,
    kind_module,
    kind_names,
)

HEAVY = ("paramiko", "serial", "cobs")  # third-party: only for ssh, serial devices
# Every kind's module, as its entry point names it.
KIND_MODULES = {ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def loaded_after(code: str) -> set[str]:
    """Modules in sys.modules after running ``code`` in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_the_plugin_loads_no_paramiko_pyserial_or_emulator():
    loaded = loaded_after("import harness.pytest_plugin")
    assert "harness.pytest_plugin" in loaded
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}
    assert not {m for m in loaded if m.startswith("harness.emulators")}
    assert not loaded & KIND_MODULES


def test_the_plugin_loads_no_asyncio_or_wcwidth():
    """Every pytest run in the environment imports the plugin: a lab's reservation (asyncio)
    and the width of non-ASCII names (wcwidth) come when they are needed."""
    loaded = loaded_after("import harness.pytest_plugin")
    assert not {m for m in loaded if m.split(".")[0] in ("asyncio", "wcwidth", "labgrid")}


def test_checking_a_serial_profile_loads_its_kind_only():
    loaded = loaded_after(
        "from harness.devices.bring_up import check_transport_settings\n"
        "from harness.profiles.device_profile import parse_profile\n"
        "check_transport_settings(parse_profile("
        "{'transport': {'kind': 'serial', 'port': '/dev/ttyACM0'}}, None, 'board'))"
    )
    assert "harness.devices.serial" in loaded and "serial" in loaded
    assert "harness.devices.ssh" not in loaded and "paramiko" not in loaded
    assert not {m for m in loaded if m.startswith("harness.emulators")}


@pytest.mark.parametrize("name", kind_names())
def test_every_registered_kind_has_its_module(name):
    module = kind_module(name)
    assert callable(module.check_settings) and callable(module.open_device)
    assert callable(module.host_tools)
    assert module.KIND.name == name


def test_every_emulator_belongs_to_one_kind():
    named = [n for kind in all_kinds() for n in (kind.emulator, *kind.more_emulators) if n]
    assert named == list(emulators())  # no emulator named by two kinds
    assert {"adb-emu", "mcu-emu", "ssh-emu", "linux-emu"} <= set(emulators())
