"""A profile's ``agent.source``: the ExecuTorch source tree an emulated board's firmware is
compiled from, trusted the way ``agent.sdk`` is (docs/device-profiles.md, docs/mcu.md).

The firmware built from a tree runs in QEMU with semihosting, through which guest code can
open files on this machine, so a profile (untrusted input) may only name a tree the user's
environment names: ``ET_HARNESS_SOURCE`` or ``ET_HARNESS_TRUSTED_SOURCES``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from harness.devices import serial
from harness.devices.base import OpenContext
from harness.profiles.device_profile import ProfileError, load_profile
from harness.runtime.firmware_tree import ENV_VAR, TRUSTED_ENV, RuntimeSource

BOARD = "transport: {kind: serial}\nemulator: mcu-emu\nmachine: mps3-an547\n"


def lay_out_tree(root: Path) -> Path:
    """The files a source tree must hold (not a buildable one: these tests build nothing)."""
    for name in (
        "runtime/executor/program.cpp",
        "schema/program.fbs",
        "third-party/flatbuffers/include/flatbuffers/flatbuffers.h",
    ):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("// placeholder\n")
    (root / "version.txt").write_text("1.5.0\n")
    return root.resolve()


@pytest.fixture
def untrusting(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv(TRUSTED_ENV, raising=False)
    return monkeypatch


def refusal(profile: Path, text: str) -> str:
    profile.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile(str(profile))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{profile}: agent.source: "), message
    return message


def test_a_trusted_tree_is_taken_relative_to_the_profile(tmp_path, untrusting) -> None:
    tree = lay_out_tree(tmp_path / "trees" / "executorch")
    profile = tmp_path / "boards" / "m55.yaml"
    profile.parent.mkdir()
    profile.write_text(BOARD + "agent: {source: ../trees/executorch}\n")
    untrusting.setenv(TRUSTED_ENV, f"/elsewhere:{tmp_path / 'trees'}")
    assert load_profile(str(profile)).agent.source == tree
    untrusting.delenv(TRUSTED_ENV)
    untrusting.setenv(ENV_VAR, str(tree))
    assert load_profile(str(profile)).agent.source == tree


def test_hostile_values_are_refused_in_one_line_naming_file_field_and_fix(
    tmp_path, untrusting
) -> None:
    profile = tmp_path / "board.yaml"
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    untrusting.setenv(TRUSTED_ENV, str(trusted))
    for value in ("[a, b]", "''", "7"):
        assert "must be the path of an ExecuTorch source tree" in refusal(
            profile, BOARD + f"agent: {{source: {value}}}\n"
        )
    assert "holds a NUL byte" in refusal(profile, BOARD + 'agent: {source: "a\\0b"}\n')
    # A relative path escaping the trusted directory, and a link out of it, are not trusted.
    outside = lay_out_tree(tmp_path / "outside")
    (trusted / "link").symlink_to(outside)
    for value in ("trusted/../outside", "trusted/link", "../../../../../../etc"):
        message = refusal(profile, BOARD + f"agent: {{source: {value}}}\n")
        assert "is not a trusted ExecuTorch source tree" in message
        assert f"add it to {TRUSTED_ENV}" in message and "semihosting" in message
    # Trusted, but not a tree: a file, an empty directory, a tree without its submodule.
    (trusted / "file").write_text("not a tree")
    (trusted / "empty").mkdir()
    for value, says in (
        ("trusted/file", "no runtime/executor/program.cpp"),
        ("trusted/empty", "no runtime/executor/program.cpp"),
    ):
        message = refusal(profile, BOARD + f"agent: {{source: {value}}}\n")
        assert f"is not an ExecuTorch source tree ({says}); point it at a checkout" in message
    half = lay_out_tree(trusted / "half")
    (half / "third-party/flatbuffers/include/flatbuffers/flatbuffers.h").unlink()
    assert "git submodule update --init third-party/flatbuffers" in refusal(
        profile, BOARD + "agent: {source: trusted/half}\n"
    )
    # Only an emulated board has its firmware built here.
    lay_out_tree(trusted / "tree")
    assert "only an emulated board (emulator: mcu-emu)" in refusal(
        profile, "transport: {kind: local}\nagent: {source: trusted/tree}\n"
    )


def test_the_board_is_built_from_the_profiles_tree(tmp_path, untrusting) -> None:
    """open_device hands build_firmware the profile's tree, described from its files."""
    tree = lay_out_tree(tmp_path / "executorch")
    untrusting.setenv(TRUSTED_ENV, str(tree))
    profile = tmp_path / "board.yaml"
    profile.write_text(BOARD + "agent: {source: executorch}\n")
    built: list[tuple[str, RuntimeSource | None]] = []

    def build_firmware(machine: str, *, source: RuntimeSource | None = None) -> Path:
        built.append((machine, source))
        return tmp_path / "etb-mcu.elf"

    class Board(contextlib.nullcontext):
        def __init__(self, elf: Path, *, machine: str) -> None:
            super().__init__(self)

    import harness.emulators.mcu as qemu_mcu

    untrusting.setattr(qemu_mcu, "build_firmware", build_firmware)
    untrusting.setattr(qemu_mcu, "McuEmulator", Board)
    with contextlib.ExitStack() as resources:
        serial.open_device(load_profile(str(profile)), OpenContext(resources))
    [(machine, source)] = built
    assert machine == "mps3-an547" and source is not None
    assert (source.path, source.version) == (tree, "1.5.0")
