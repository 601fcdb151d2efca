"""Checks on agent/'s C and C++ beside the Python ones: every source file carries the
project's SPDX license line, every compile of every agent/ build treats warnings as
errors, and agent/.clang-format is a style clang-format reads."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from prerequisites import require

from harness.agent.build import find_cmake
from harness.agent.sdk import ensure_sdk, host_abi

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "agent"
NOT_SOURCE = {".md", ".lock", ".yaml"}  # docs, the SDK pin, the race suppressions


def agent_sources() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "agent"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return [ROOT / n for n in names if Path(n).suffix not in NOT_SOURCE]


def test_every_agent_source_file_starts_with_the_projects_spdx_line():
    license_id = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["license"]
    sources = agent_sources()
    assert len(sources) > 60
    unlicensed = [
        str(p.relative_to(ROOT)) for p in sources
        if f"SPDX-License-Identifier: {license_id}" not in p.read_text("utf-8").split("\n", 1)[0]
    ]
    assert not unlicensed, f"no SPDX-License-Identifier: {license_id} on line 1 of {unlicensed}"


def compile_commands(source: Path, build: Path, *options: str) -> list[dict]:
    subprocess.run([str(find_cmake()), "-S", str(source), "-B", str(build),
                    "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *options],
                   check=True, capture_output=True, timeout=300)
    return json.loads((build / "compile_commands.json").read_text("utf-8"))


def test_every_compile_of_the_cmake_builds_treats_warnings_as_errors(tmp_path):
    sdk = ensure_sdk(host_abi())
    agent = compile_commands(AGENT / "runtime", tmp_path / "agent",  # a command per source
                             f"-Dexecutorch_DIR={sdk.cmake_dir}", "-DCMAKE_UNITY_BUILD=OFF")
    codec = compile_commands(AGENT / "codec", tmp_path / "codec", "-DETB_WIRE_BUILD_TOOLS=ON")
    names = {Path(c["file"]).name for c in agent + codec}
    assert {"main.cpp", "wire_decode.c", "etb_wiretool.c"} <= names
    lax = [c["file"] for c in agent + codec if "-Werror" not in c["command"].split()]
    assert not lax, f"compiled without -Werror: {lax}"


def test_every_compile_of_the_firmware_treats_warnings_as_errors(tmp_path):
    require("arm-none-eabi-gcc")
    include = ensure_sdk(host_abi()).include
    for board in ("mps2-an385", "mps3-an547"):
        dry = subprocess.run(["make", "-n", "-C", str(AGENT / "mcu"), f"BOARD={board}",
                              f"BUILD={tmp_path / board}", f"EXECUTORCH_INCLUDE={include}"],
                             check=True, capture_output=True, text=True, timeout=60).stdout
        compiles = [line for line in dry.splitlines() if " -c " in line]
        assert len(compiles) > 10
        assert all("-Werror" in line.split() for line in compiles), board


def test_the_clang_format_style_parses():
    if shutil.which("clang-format") is None:
        pytest.fail("clang-format not found: run `bash ci/setup.sh` to install it")
    style = AGENT / ".clang-format"
    dumped = subprocess.run(["clang-format", f"--style=file:{style}", "--dump-config"],
                            check=True, capture_output=True, text=True, timeout=60).stdout
    assert "ColumnLimit:     120" in dumped
