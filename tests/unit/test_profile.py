"""Device profiles: every shipped profile loads; every error names the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profiles.device_profile import ProfileError, load_profile, profile_names
from harness.untrusted.trust import TRUSTED_PROFILES_ENV


@pytest.mark.parametrize("name", profile_names())
def test_every_shipped_profile_loads(name):
    profile = load_profile(name)
    assert profile.name == name and profile.kind in ("local", "ssh", "adb", "serial")


@pytest.mark.parametrize("name", profile_names())
def test_every_shipped_profile_passes_the_value_rules(name, tmp_path, monkeypatch):
    from harness.farm.selection import check_profile

    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config of the machine's
    check_profile(load_profile(name))


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "board.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("transport: {kind: local}\ncolour: red\n", "board.yaml: colour: unknown field"),
        ("description: no transport\n", "board.yaml: transport: required"),
        ("transport: {kind: usb}\n", "board.yaml: transport.kind: 'usb' is not one of"),
        ("transport: {kind: local}\ntimeouts: {case: -1}\n", "timeouts.case: must be seconds > 0"),
        (
            "transport: {kind: local}\ntimeouts: {case: .nan}\n",
            "timeouts.case: must be seconds > 0",
        ),
        ("transport: {kind: local}\ntimeouts: {cse: 3}\n", "timeouts.cse: unknown field"),
        ("transport: {kind: local}\nagent: {wrapper: valgrind}\n", "agent.wrapper: must be a list"),
        ("transport: {kind: local}\nagent: {env: {'é': x}}\n", "agent.env.é: not a valid"),
        ("transport: {kind: local}\nagent: {prebuilt: 3}\n", "agent.prebuilt: must be the path"),
        ("transport: {kind: local}\nemulator: vm\n", "emulator: 'vm' is not one of"),
        ("transport: {kind: local}\ntags: emulated\n", "tags: must be a list of strings"),
        (
            "transport: {kind: local}\ntransport: {kind: ssh}\n",
            "line 2, column 1: key 'transport' appears twice",
        ),
        ("transport: {kind: local}\nabi: [x\n", "not valid YAML"),
        (
            "transport: {kind: local}\nmachine: mps2-an385\n",
            "machine: only the mcu-emu emulator takes a machine",
        ),
        (
            "transport: {kind: serial}\nemulator: mcu-emu\nmachine: mps2-an505\n",
            "machine: 'mps2-an505' is not one of mps2-an385, mps3-an547",
        ),
    ],
)
def test_bad_profiles_are_refused_naming_file_and_field(tmp_path, text, expected):
    with pytest.raises(ProfileError) as refused:
        load_profile(write(tmp_path, text))
    assert expected in str(refused.value)
    assert "board.yaml" in str(refused.value)


@pytest.mark.parametrize(
    "extra, expected",
    [
        ("tags: [a, 3]\n", "tags[1]: must be a string; got 3"),
        ("backends: [XnnpackBackend, {x: 1}]\n", "backends[1]: must be a string; got {'x': 1}"),
        ("description: [x]\n", "description: must be a string; got ['x']"),
        ("agent: {wrapper: [valgrind, 3]}\n", "agent.wrapper[1]: must be a string; got 3"),
        ("agent: {env: {A: [1]}}\n", "agent.env.A: must be a string; got [1]"),
        ("agent: {env: [A]}\n", "agent.env: must be a mapping of variable names to strings"),
        ("agent: {colour: red}\n", "agent.colour: unknown field; allowed: deployment, env,"),
        ("agent: 5\n", "agent: must be a mapping of env, wrapper, prebuilt, sdk, deployment"),
        ("agent: {sdk: [x]}\n", "agent.sdk: must be the path of an ExecuTorch install prefix"),
        ("timeouts: 5\n", "timeouts: must be a mapping of seconds; got 5"),
        ("timeouts: {case: '3'}\n", "timeouts.case: must be a number of seconds; got '3'"),
    ],
)
def test_lists_maps_and_sections_of_a_profile_go_through_the_validator(tmp_path, extra, expected):
    with pytest.raises(ProfileError) as refused:
        load_profile(write(tmp_path, "transport: {kind: local}\n" + extra))
    assert str(refused.value).startswith(f"{tmp_path / 'board.yaml'}: {expected}"), refused.value


def test_the_rules_between_fields_run_after_each_field_passed_its_own(tmp_path):
    """A field's own refusal comes first; then the rule that relates it to another."""
    with pytest.raises(ProfileError, match=r"machine: 'm' is not one of"):
        load_profile(write(tmp_path, "transport: {kind: local}\nmachine: m\n"))
    with pytest.raises(ProfileError, match=r"agent.sdk: a prebuilt agent is not built here"):
        load_profile(
            write(tmp_path, "transport: {kind: ssh, host: b}\nagent: {prebuilt: d, sdk: s}\n")
        )


def test_a_profile_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "board.yaml"
    path.write_bytes(b"description: \xff\ntransport: {kind: local}\n")
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_profile(str(path))


def test_unknown_device_names_the_known_ones():
    with pytest.raises(ProfileError, match=r"known devices: .*host"):
        load_profile("no-such-device")


def test_qemu_mcu_boards_come_from_machine_with_the_m3_as_default(tmp_path):
    emulated = "transport: {kind: serial}\nemulator: mcu-emu\n"
    assert load_profile(write(tmp_path, emulated)).machine == "mps2-an385"
    assert load_profile(write(tmp_path, emulated + "machine: mps3-an547\n")).machine == "mps3-an547"
    assert load_profile("mcu-m55-emu").machine == "mps3-an547"
    assert load_profile(write(tmp_path, "transport: {kind: local}\n")).machine is None


def test_prebuilt_path_is_relative_to_the_profile(tmp_path, monkeypatch):
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(tmp_path))  # its agent fields run here
    profile = load_profile(write(tmp_path, "transport: {kind: local}\nagent: {prebuilt: dist}\n"))
    assert profile.agent.prebuilt == (tmp_path / "dist").resolve()


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "transport: {kind: ssh, host: board}\nemulator: ssh-emu\n",
            "transport.host: set by the ssh-emu",
        ),
        (
            "transport: {kind: adb, connect: 'h:1'}\nemulator: adb-emu\n",
            "transport.connect: set by",
        ),
        (
            "transport: {kind: serial, baudrate: 9600}\nemulator: mcu-emu\n",
            "transport.baudrate: the mcu-emu emulator sets the port itself",
        ),
    ],
)
def test_emulated_profiles_refuse_fields_the_emulator_sets(tmp_path, text, expected):
    from harness.devices.bring_up import open_device

    with pytest.raises(ProfileError, match=expected):
        open_device(load_profile(write(tmp_path, text)))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("transport: {kind: ssh, hots: board}\n", "transport.hots: unknown field"),
        ("transport: {kind: ssh, host: board, port: '22'}\n", "transport.port: must be an integer"),
        ("transport: {kind: adb, server_port: 0}\n", "transport.server_port: must be a TCP port"),
        ("transport: {kind: serial, baudrate: 9600}\n", "give exactly one of 'port'"),
        ("transport: {kind: local, host: x}\n", "transport.host: unknown field"),
    ],
)
def test_transport_fields_are_checked_before_the_device_is_reached(tmp_path, text, expected):
    from harness.devices.bring_up import check_transport_settings

    with pytest.raises(ProfileError, match=expected):
        check_transport_settings(load_profile(write(tmp_path, text)))
