"""The runtime on the MCU boards is ExecuTorch's own: a fault put into its source is caught.

The ExecuTorch source tree is copied to a temporary directory once per module; each case
puts one fault into ExecuTorch's own code there (and takes it out again after), builds the
firmware from the copy (``ET_HARNESS_SOURCE``) and runs the suites on ``mcu-emu`` until
their first failure (:mod:`power_runs`: the question is only whether they catch the fault):
they must fail with delivery differences (verdicts that are not exact), never with
infrastructure errors. With the stand-in, the same faults would change nothing: the
firmware would not contain the patched code. Each build takes the unchanged files' objects
from the object cache, made by the builds of the unpatched tree (agent/mcu/runtime.mk
compiles a tree through a link in the build directory, so its place is not in them).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import power_runs
import pytest

from harness.emulators.mcu import build_firmware, firmware_source_hash
from harness.runtime.firmware_tree import find_runtime_source, runtime_source

ROOT = Path(__file__).resolve().parents[2]
SOURCE = find_runtime_source()
pytestmark = pytest.mark.slow
_RUN_TIMEOUT_S = 900

# (file in the tree, the text as upstream has it, the same text with the fault)
FAULTS = {
    "delegate-gets-another-delegates-specs": (
        "runtime/executor/method.cpp",
        "backend_options->get_options(delegate.id()->c_str());",
        "backend_options->get_options(\n"
        "                delegates->Get((i + 1) % n_delegate)->id()->c_str());",
    ),
    "last-option-dropped": (
        "runtime/backend/backend_options_map.h",
        "entries_[i].options.data(), entries_[i].options.size());",
        "entries_[i].options.data(),\n"
        "            entries_[i].options.size() - (entries_[i].options.size() > 0));",
    ),
    "get-option-ok-for-unknown-backend": (
        "runtime/backend/interface.cpp",
        "  if (!backend_class) {\n    return Error::NotFound;\n  }\n"
        "  BackendOptionContext backend_option_context;\n"
        "  executorch::runtime::Span<BackendOption> backend_options_ref(\n"
        "      backend_options.data(), backend_options.size());\n"
        "  auto result =\n      backend_class->get_option(",
        "  if (!backend_class) {\n    return Error::Ok;\n  }\n"
        "  BackendOptionContext backend_option_context;\n"
        "  executorch::runtime::Span<BackendOption> backend_options_ref(\n"
        "      backend_options.data(), backend_options.size());\n"
        "  auto result =\n      backend_class->get_option(",
    ),
}


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source tree, shared by this module's cases (one at a time); mcu-emu's
    image of the tree itself is built first, so that its objects are in the object cache."""
    assert SOURCE is not None
    build_firmware("mps2-an385", source=SOURCE)  # waits if another test is building it
    copy = tmp_path_factory.mktemp("patched") / "executorch"
    shutil.copytree(SOURCE.path, copy, symlinks=True)
    return copy


@pytest.fixture
def patched_tree(tree_copy: Path, fault: str) -> Iterator[Path]:
    """The copy with ``fault`` in it (the anchor must occur exactly once); the file as it
    was again after the case."""
    file, original, faulty = FAULTS[fault]
    target = tree_copy / file
    target.chmod(0o644)  # CI's shared tree has no write bits; the copy keeps them
    text = target.read_text(encoding="utf-8")
    assert text.count(original) == 1, f"{file} changed upstream: the fault's anchor is gone"
    target.write_text(text.replace(original, faulty), encoding="utf-8")
    try:
        yield tree_copy
    finally:
        target.write_text(text, encoding="utf-8")


@pytest.mark.skipif(SOURCE is None, reason="no ExecuTorch source tree (set ET_HARNESS_SOURCE)")
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_in_executorchs_source_fails_the_suites_with_delivery_differences(
    tmp_path: Path, fault: str, patched_tree: Path, record_property
) -> None:
    results = tmp_path / "results"
    env = power_runs.environment(ET_HARNESS_SOURCE=str(patched_tree))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites",
            "--device",
            "mcu-emu",
            "-q",
            "-p",
            "no:cacheprovider",
            *power_runs.PYTEST_ARGS,
            "--results-dir",
            str(results),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=_RUN_TIMEOUT_S,
        check=False,
    )
    records = [
        json.loads(line)
        for path in results.rglob("results.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    device = [r for r in records if r["device"] == "mcu-emu"]
    assert device, done.stdout[-3000:] + done.stderr[-3000:]
    built = (
        f"0.1.0+{firmware_source_hash('mps2-an385', runtime_source(patched_tree, 'the copy'))[:12]}"
    )
    assert {r["facts"]["agent_version"] for r in device} == {built}  # the patched build ran
    assert all(r["facts"]["runtime"].endswith("no stand-in") for r in device)
    assert not [r["nodeid"] for r in device if r["infra"]], done.stdout[-3000:]
    failed = [r for r in device if r["outcome"] == "failed"]
    assert failed, f"no suite caught {fault}:\n{done.stdout[-3000:]}"
    differing = [r for r in failed if any(not v["ok"] and v["differences"] for v in r["verdicts"])]
    assert differing, [r["longrepr"][:300] for r in failed[:3]]
    record_property("failed_with_differences", sorted(r["nodeid"] for r in differing))
    assert done.returncode != 0
