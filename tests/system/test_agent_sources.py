"""Checks on agent/'s C and C++ beside the Python ones: every source file carries the
project's SPDX license line, every compile of every agent/ build treats warnings as
errors, and agent/.clang-format is a style clang-format reads."""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from prerequisites import require

from harness.runtime.agent_build import find_cmake
from harness.runtime.wheel_sdk import ensure_sdk, host_abi

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "agent"
NOT_SOURCE = {".md", ".lock", ".yaml"}  # docs, the SDK pin, the race suppressions
# linux-emu's /etc as the board reads it (passwd, shadow and group have no comment syntax)
BOARD_FILES = Path("agent/linux-board")


def agent_sources() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "agent"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    return [
        ROOT / n
        for n in names
        if Path(n).suffix not in NOT_SOURCE and Path(n).parent != BOARD_FILES
    ]


def test_every_agent_source_file_starts_with_the_projects_spdx_line():
    license_id = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["license"]
    sources = agent_sources()
    assert len(sources) > 60
    unlicensed = [
        str(p.relative_to(ROOT))
        for p in sources
        if f"SPDX-License-Identifier: {license_id}" not in p.read_text("utf-8").split("\n", 1)[0]
    ]
    assert not unlicensed, f"no SPDX-License-Identifier: {license_id} on line 1 of {unlicensed}"


def compile_commands(source: Path, build: Path, *options: str) -> list[dict[str, Any]]:
    subprocess.run(
        [
            str(find_cmake()),
            "-S",
            str(source),
            "-B",
            str(build),
            "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
            *options,
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return json.loads((build / "compile_commands.json").read_text("utf-8"))


def test_every_compile_of_the_cmake_builds_treats_warnings_as_errors(tmp_path):
    sdk = ensure_sdk(host_abi())
    agent = compile_commands(
        AGENT / "runtime",
        tmp_path / "agent",  # a command per source
        f"-Dexecutorch_DIR={sdk.cmake_dir}",
        "-DCMAKE_UNITY_BUILD=OFF",
    )
    codec = compile_commands(AGENT / "codec", tmp_path / "codec", "-DETB_WIRE_BUILD_TOOLS=ON")
    names = {Path(c["file"]).name for c in agent + codec}
    assert {"main.cpp", "wire_decode.c", "etb_wiretool.c"} <= names
    lax = [c["file"] for c in agent + codec if "-Werror" not in c["command"].split()]
    assert not lax, f"compiled without -Werror: {lax}"


def test_every_compile_of_the_firmware_treats_warnings_as_errors(tmp_path):
    require("arm-none-eabi-gcc")
    include = ensure_sdk(host_abi()).include
    for board in ("mps2-an385", "mps3-an547"):
        dry = subprocess.run(
            [
                "make",
                "-n",
                "-C",
                str(AGENT / "mcu"),
                f"BOARD={board}",
                f"BUILD={tmp_path / board}",
                f"EXECUTORCH_INCLUDE={include}",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        compiles = [line for line in dry.splitlines() if " -c " in line]
        assert len(compiles) > 10
        assert all("-Werror" in line.split() for line in compiles), board


def test_the_c_and_cpp_sources_are_formatted_by_the_agents_style():
    """agent/ and tests/faults/ as agent/.clang-format formats them (and it parses)."""
    if shutil.which("clang-format") is None:
        pytest.fail("clang-format not found: run `bash ci/setup.sh` to install it")
    style = AGENT / ".clang-format"
    dumped = subprocess.run(
        ["clang-format", f"--style=file:{style}", "--dump-config"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "ColumnLimit:     120" in dumped
    sources = sorted(
        path
        for folder in (AGENT, AGENT.parent / "tests" / "faults")
        for path in folder.rglob("*")
        if path.suffix in (".c", ".cc", ".cpp", ".h", ".hpp") and "build" not in path.parts
    )
    assert len(sources) > 50
    checked = subprocess.run(
        ["clang-format", f"--style=file:{style}", "--dry-run", "--Werror", *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, (
        f"{checked.stderr[:3000]}\nreformat with: clang-format -i --style=file:{style} FILE"
    )


FIT_HEADER = AGENT / "codec" / "include" / "etb" / "runtime_fit.hpp"


def _tree(root: Path, key: int, value: int, backends: int | None) -> Path:
    """A stand-in tree with the runtime's three limits (only what runtime_fit.hpp reads)."""
    backend = root / "executorch" / "runtime" / "backend"
    backend.mkdir(parents=True)
    (backend / "options.h").write_text(
        "#pragma once\n#include <stddef.h>\nnamespace executorch { namespace runtime {\n"
        f"static constexpr size_t kMaxOptionKeyLength = {key};\n"
        f"static constexpr size_t kMaxOptionValueLength = {value};\n}} }}\n"
    )
    if backends is not None:
        (backend / "backend_options_map.h").write_text(
            "#pragma once\n#include <executorch/runtime/backend/options.h>\n"
            "namespace executorch { namespace runtime {\nclass LoadBackendOptionsMap final {\n"
            f" private:\n  static constexpr size_t kMaxBackends = {backends};\n}};\n}} }}\n"
        )
    return root


@pytest.mark.parametrize(
    ("key", "value", "backends", "refusal"),
    [
        (64, 256, 8, None),
        (64, 256, None, None),  # a tree before the load-time map: nothing to check there
        (63, 256, 8, "kMaxOptionKeyLength"),
        (64, 255, 8, "kMaxOptionValueLength"),
        (64, 256, 7, "kMaxBackends"),
    ],
)
def test_the_build_fails_when_the_wires_limits_do_not_fit_the_trees(
    tmp_path: Path, key: int, value: int, backends: int | None, refusal: str | None
) -> None:
    """etb/runtime_fit.hpp (included where the agent and firmware copy options into the
    runtime's types): 63-byte keys, 255-byte strings and 8 backends must fit the tree."""
    require("g++")
    built = compile_fit(_tree(tmp_path / "tree", key, value, backends), tmp_path)
    if refusal is None:
        assert built.returncode == 0, built.stderr
    else:
        assert built.returncode != 0 and refusal in built.stderr, built.stderr


def test_the_wheels_headers_hold_the_wires_limits(tmp_path: Path) -> None:
    require("g++")
    built = compile_fit(ensure_sdk(host_abi()).include, tmp_path)
    assert built.returncode == 0, built.stderr


def compile_fit(include: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """etb/runtime_fit.hpp compiled against the runtime headers under ``include``."""
    source = tmp_path / "fit.cpp"
    source.write_text('#include "etb/runtime_fit.hpp"\n')
    argv = ["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
    argv += [f"-I{include}", f"-I{FIT_HEADER.parents[1]}", str(source)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
