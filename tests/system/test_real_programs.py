"""The project's own real programs (``tests/programs/``, exported by ``export.py`` with the
versions of ``requirements.txt``): what each holds, read as the runtime's loader reads it;
operators outside the delegates computed by the agent's kernels, exactly as torch computed
them, on the host and the arm64 boards (ssh-emu, and adb-emu through the glibc bundle),
through ``et.check_program``, ``et-harness send`` and the pytest suite; an operator no
kernel library has named in the verdict; damaged copies refused in one line before
anything travels."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import math
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.data.messages import LoadPath
from harness.data.options import OptionsMap
from harness.devices.hosted import HostedDevice
from harness.lifecycle.cache import cache_root
from harness.profiles.device_profile import load_profile
from harness.programs.contents import MethodContents, ProgramError, read_program
from harness.runner import CaseRunner, open_runner
from harness.runner.program_check import MethodFailed
from harness.runtime.wheel_sdk import default_version

cli_main = importlib.import_module("harness.cli.main")  # the module (harness.cli.main is its main)

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"
XNN = "XnnpackBackend"
MISSING = "missing operator: et_harness::double.out"

HOLDS = {
    "custom_op.pte": (MethodContents("forward", (), ("aten::relu.out", "et_harness::double.out")),),
    "not_delegated.pte": (
        MethodContents(
            "forward",
            (),
            ("aten::permute_copy.out", "aten::addmm.out", "aten::relu.out", "aten::cumsum.out"),
        ),
    ),
    "partly_delegated.pte": (MethodContents("forward", (XNN, XNN), ("aten::cumsum.out",)),),
    "two_methods.pte": (
        MethodContents("forward", (XNN,), ()),
        MethodContents("scaled", (XNN,), ("aten::cumsum.out",)),
    ),
    "xnnpack.pte": (MethodContents("forward", (XNN,), ()),),
}
RUNNING = ("not_delegated.pte", "partly_delegated.pte", "two_methods.pte", "xnnpack.pte")
OPTIONS = OptionsMap.from_dict({XNN: {"workspace_sharing_mode": 1}})


def test_the_committed_files_are_the_exported_ones() -> None:
    """SHA256SUMS (written by export.py) matches every file, and the programs were exported
    with the executorch the agent is built against (re-export them when the pin moves)."""
    lines = (PROGRAMS / "SHA256SUMS").read_text().splitlines()
    sums = {name: digest for digest, name in (line.split("  ") for line in lines)}
    assert sorted(sums) == sorted([*HOLDS, "outputs.json"])
    assert sorted(p.name for p in PROGRAMS.glob("*.pte")) == sorted(HOLDS)
    for name, digest in sums.items():
        assert hashlib.sha256((PROGRAMS / name).read_bytes()).hexdigest() == digest, name
    pins = (PROGRAMS / "requirements.txt").read_text()
    assert re.search(r"^torch==\d+\.\d+\.\d+$", pins, re.MULTILINE)
    assert re.search(rf"^executorch=={re.escape(default_version())}$", pins, re.MULTILINE)


@pytest.mark.parametrize("name", sorted(HOLDS))
def test_what_each_program_holds(name: str) -> None:
    contents = read_program(PROGRAMS / name)
    assert contents.methods == HOLDS[name]
    if name != "custom_op.pte":  # the others have constants, in segments after the FlatBuffer
        assert contents.header is not None and contents.segments


def test_what_send_prints_first() -> None:
    lines = read_program(PROGRAMS / "two_methods.pte").describe().splitlines()
    assert lines == [
        f"program {PROGRAMS / 'two_methods.pte'}: 4000 bytes, 2 methods",
        "  method 'forward': delegates XnnpackBackend; operators outside delegates: none",
        "  method 'scaled': delegates XnnpackBackend; operators outside delegates: "
        "aten::cumsum.out",
    ]
    partly = read_program(PROGRAMS / "partly_delegated.pte").describe()
    assert "delegates XnnpackBackend x2; operators outside delegates: aten::cumsum.out" in partly


# ---- damaged copies, refused before they travel -----------------------------------------


def _eh00(data: bytearray, field: int, value: int) -> None:
    """Overwrite the extended header's program_size (0), segment_base_offset (1) or
    segment_data_size (2)."""
    struct.pack_into("<Q", data, 16 + 8 * field, value)


def _segment_moved_out(good: bytes) -> bytes:
    """partly_delegated.pte with the DataSegment whose offset is 1536 moved past the end."""
    size = struct.unpack_from("<Q", good, 16)[0]
    at = [m.start() for m in re.finditer(re.escape(struct.pack("<Q", 1536)), good[:size])]
    assert len(at) == 1, at  # the one table field holding it
    data = bytearray(good)
    struct.pack_into("<Q", data, at[0], len(good))
    return bytes(data)


def damaged(good: bytes) -> dict[str, tuple[bytes, str]]:
    """Damaged copies of partly_delegated.pte and what their refusal says."""
    program_size = struct.unpack_from("<Q", good, 16)[0]
    bigger, smaller, base = bytearray(good), bytearray(good), bytearray(good)
    _eh00(bigger, 0, len(good) + 4096)
    _eh00(smaller, 0, program_size - 64)
    _eh00(base, 1, len(good))
    return {
        "truncated-in-segments": (
            good[: len(good) - 100],
            r"puts the segments at bytes 1920 to 4128, but the file has 4028 bytes; the file "
            r"is cut short",
        ),
        "truncated-in-flatbuffer": (good[:1000], "but the file has 1000 bytes; the file is cut"),
        "truncated-in-head": (good[:40], "40 bytes, but the runtime reads a program's first 64"),
        "header-size-past-file": (
            bytes(bigger),
            r"the extended header \(eh00\) says the program is 8224 bytes, but the file has "
            r"4128; the file is cut short",
        ),
        "header-size-short": (
            bytes(smaller),
            r"is outside the 1784-byte program the extended header \(eh00\) gives; the file "
            r"is damaged",
        ),
        "segment-base-past-file": (bytes(base), "puts the segments at bytes 4128 to 6336"),
        "segment-past-file": (
            _segment_moved_out(good),
            r"segment 3 lies at bytes 6048 to 6304, but the file has 4128 bytes",
        ),
    }


DAMAGED = damaged((PROGRAMS / "partly_delegated.pte").read_bytes())


@pytest.mark.parametrize("variant", sorted(DAMAGED))
def test_a_damaged_program_is_refused_in_one_line(tmp_path: Path, variant: str) -> None:
    data, said = DAMAGED[variant]
    path = tmp_path / f"{variant}.pte"
    path.write_bytes(data)
    with pytest.raises(ProgramError) as refused:
        read_program(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    assert re.search(said, message), message


def test_send_refuses_a_damaged_program_before_a_device_is_brought_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_device(name: str) -> None:
        raise AssertionError(f"device {name} brought up for a damaged program")

    monkeypatch.setattr(cli_main, "_opened", no_device)
    for variant in ("truncated-in-segments", "header-size-past-file"):
        path = tmp_path / f"{variant}.pte"
        path.write_bytes(DAMAGED[variant][0])
        assert cli_main.main(["send", "--program", str(path), "--device", "host"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.count("\n") == 1 and f"{path}: the extended header" in captured.err


# ---- on devices ---------------------------------------------------------------------------


@pytest.fixture
def on_host() -> Iterator[tuple[HostedDevice, CaseRunner]]:
    device, runner = open_runner(load_profile("host"))
    assert isinstance(device, HostedDevice)
    try:
        yield device, runner
    finally:
        runner.close()
        device.close()


def _close(actual: str | None, expected: list[float]) -> bool:
    values = [float(v) for v in (actual or "").split(",") if v]
    return len(values) == len(expected) and all(
        math.isclose(a, e, rel_tol=1e-4, abs_tol=1e-5)
        for a, e in zip(values, expected, strict=True)
    )


@pytest.mark.parametrize("device", ["host", "ssh-emu", "adb-emu"])
def test_real_programs_are_checked_exactly_and_compute_what_torch_did(device: str) -> None:
    """Every running program, every method on every load path: exact, its outputs
    torch's for the agent's seeded inputs and unchanged by the option; the program with
    an operator of the user's own fails, naming it."""
    outputs = json.loads((PROGRAMS / "outputs.json").read_text())
    opened, runner = open_runner(load_profile(device))
    with contextlib.closing(opened), contextlib.closing(runner):  # the runner closes first
        assert set(runner.load_paths) == set(LoadPath)
        for name in RUNNING:
            checked = runner.check_program(PROGRAMS / name, OPTIONS, reference=outputs[name])
            checked.raise_for_differences()
            # Each method's outputs, on every path, 3 executes, 2 loads, and through
            # set_option: the option changed no element, and every run is torch's.
            assert not checked.effects and not checked.off_reference, checked.render()
            assert [(r.method, r.path) for r in checked.results] == [
                (m.name, path) for m in HOLDS[name] for path in runner.load_paths
            ]
            for result in checked.results:
                method = next(m for m in HOLDS[name] if m.name == result.method)
                got = result.verdict.report.fact("outputs")
                assert isinstance(got, str | None), (name, result.method, got)
                assert _close(got, outputs[name][result.method]), (name, result.method, got)
                # One entry for XNNPACK, however many of its delegates the method has.
                xnn = [e for e in result.verdict.report.entries if e.name == XNN]
                assert len(xnn) == (1 if XNN in method.delegates else 0)
                assert all(e.is_recorded and e.calls == method.delegates.count(XNN) for e in xnn)
        checked = runner.check_program(PROGRAMS / "custom_op.pte", OptionsMap())
        assert not checked.ok
        for result in checked.results:
            assert result.verdict.report.message.endswith(MISSING), result.verdict.report.message
        failed = f"failed on load path program: OperatorMissing .*{MISSING}"
        with pytest.raises(MethodFailed, match=failed):
            checked.raise_for_differences()


def test_a_damaged_program_is_never_pushed(
    on_host: tuple[HostedDevice, CaseRunner], tmp_path: Path
) -> None:
    """Refused before a copy is made in the cache or anything reaches the device: no file
    there holds its bytes (other tests write beside them meanwhile)."""
    device, runner = on_host
    variants = ("header-size-short", "truncated-in-segments", "segment-past-file")
    for variant in variants:
        path = tmp_path / f"{variant}.pte"
        path.write_bytes(DAMAGED[variant][0])
        with pytest.raises(ProgramError, match=rf"{variant}\.pte: "):
            runner.check_program(path, OPTIONS)
    damaged = {DAMAGED[variant][0] for variant in variants}
    sizes = {len(data) for data in damaged}
    for place in (cache_root() / "programs", Path(device.work_dir)):
        for file in place.rglob("*"):
            with contextlib.suppress(FileNotFoundError):  # removed by another test meanwhile
                if file.is_file() and file.stat().st_size in sizes:
                    assert file.read_bytes() not in damaged, file


# ---- through send and the pytest suite --------------------------------------------------------


@pytest.mark.parametrize("device", ["host", "ssh-emu"])
def test_send_checks_a_partly_delegated_program(
    device: str, capsys: pytest.CaptureFixture[str]
) -> None:
    program = PROGRAMS / "partly_delegated.pte"
    assert cli_main.main(["send", "--program", str(program), "--device", device]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == read_program(program).describe().splitlines()
    assert out[-1] == f"program {program}: 1 method x load paths = 4 loads, 4 exact"


def test_send_names_a_missing_operator(capsys: pytest.CaptureFixture[str]) -> None:
    program = PROGRAMS / "custom_op.pte"
    assert cli_main.main(["send", "--program", str(program), "--device", "host"]) == 1
    out = capsys.readouterr().out
    assert out.count(MISSING) == len(LoadPath)  # each verdict's message
    assert out.splitlines()[-1].endswith("4 loads, 0 exact")


def _suite(tmp_path: Path, program: str, devices: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "suites/test_user_program.py", "-p", "no:cacheprovider",
         "-k", "test_your_program", "--device", devices, "--program", str(PROGRAMS / program),
         "--results-dir", str(tmp_path / "results")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_pytest_suite_checks_a_partly_delegated_program(tmp_path: Path) -> None:
    done = _suite(tmp_path, "partly_delegated.pte", "host,ssh-emu")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout


def test_the_pytest_suite_names_a_missing_operator(tmp_path: Path) -> None:
    done = _suite(tmp_path, "custom_op.pte", "host")
    assert done.returncode == 1, done.stdout[-3000:]
    failure = next(line for line in done.stdout.splitlines() if "MethodFailed:" in line)
    assert failure.endswith(MISSING), failure
