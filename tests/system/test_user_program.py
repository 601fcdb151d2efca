"""A user's own program (harness/runner/program_check.py, harness/programs/contents.py):
read from the file itself within bounds, refused with one line when it is not a
program, and loaded by the agent without a crash however it is damaged."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from prerequisites import require

from harness.cli.main import main
from harness.codec import wire
from harness.data.messages import Action, LoadPath, Outcome, Request
from harness.data.options import OptionsMap
from harness.data.outputs import digest_of, input_values
from harness.programs.contents import (
    MethodContents,
    ProgramError,
    parse_program,
    read_program,
)
from harness.programs.probe_program import probe_program
from harness.programs.xnnpack import (
    BIAS,
    FEATURES,
    WEIGHT,
    XNNPACK_BACKEND,
    delegate_blob,
    xnnpack_program,
)
from harness.runtime.agent_build import ensure_agent
from harness.runtime.wheel_sdk import ensure_sdk, host_abi

PROBES = ("ProbeA", "ProbeB")
MULTI_METHODS = ("forward", "second")
MAP_TEXT = """backends:
  ProbeA:
    - {key: threads, value: 4}
    - {key: fast, value: true}
  ProbeB:
    - {key: name, value: "b"}
  XnnpackBackend:
    - {key: workspace_sharing_mode, value: 1}
    - {key: weight_cache_enabled, value: false}
"""


def multi_delegate_program() -> Path:
    """XNNPACK plus two probes, in two methods: what a user's exported program looks like."""
    return xnnpack_program(PROBES, MULTI_METHODS)


def test_methods_and_delegates_are_read_from_the_program() -> None:
    assert read_program(multi_delegate_program()).methods == tuple(
        MethodContents(name, (*PROBES, XNNPACK_BACKEND)) for name in MULTI_METHODS
    )
    assert read_program(xnnpack_program()).methods == (
        MethodContents("forward", (XNNPACK_BACKEND,)),
    )
    assert [m.name for m in read_program(probe_program(PROBES)).methods] == ["forward", "second"]


def test_a_file_that_is_not_a_program_is_refused_in_one_line(tmp_path: Path) -> None:
    text = tmp_path / "model.pte"
    text.write_text("not a program at all", encoding="utf-8")
    with pytest.raises(ProgramError, match=r"model\.pte: not an ExecuTorch program \(no ET12"):
        read_program(text)
    with pytest.raises(ProgramError, match="limit 64 bytes"):
        read_program(xnnpack_program(), limit=64)
    fifo = tmp_path / "fifo.pte"
    os.mkfifo(fifo)
    with pytest.raises(ProgramError, match="a FIFO, not a regular file"):
        read_program(fifo)


def test_damaged_programs_are_refused_never_crash_the_reader() -> None:
    good = multi_delegate_program().read_bytes()
    rng = random.Random(22)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(3000):
        data = bytearray(good[: rng.randrange(8, len(good) + 1)])
        for _ in range(rng.randint(0, 6)):
            data[rng.randrange(min(len(data), 512))] = rng.randrange(256)
        try:
            for method in parse_program(bytes(data)).methods:
                assert all(1 <= len(d.encode()) <= 63 for d in method.delegates)
            outcomes["read"] += 1
        except ProgramError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["read"] and outcomes["refused"], outcomes


# ---- the command line ----------------------------------------------------------------------


@pytest.fixture
def map_file(tmp_path: Path) -> Path:
    path = tmp_path / "map.yaml"
    path.write_text(MAP_TEXT, encoding="utf-8")
    return path


def test_send_program_checks_every_method_on_every_load_path(
    map_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "send",
        "--program",
        str(multi_delegate_program()),
        "--options",
        str(map_file),
        "--probe",
        "ProbeA",
        "--probe",
        "ProbeB",
        "--device",
        "host",
    ]
    assert main(argv) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert out.splitlines()[-1].endswith("2 methods x load paths = 8 loads, 8 exact")
    assert out.count("backend XnnpackBackend: ok, 2 options exact") == 8
    assert "method 'second', load [module_both] check: ok" in out


def test_send_xnnpack_program_alone(map_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only_xnnpack = map_file.parent / "xnnpack.yaml"
    only_xnnpack.write_text(
        "backends:\n  XnnpackBackend:\n    - {key: workspace_sharing_mode, value: 0}\n",
        encoding="utf-8",
    )
    argv = [
        "send",
        "--program",
        str(xnnpack_program()),
        "--options",
        str(only_xnnpack),
        "--device",
        "host",
    ]
    assert main(argv) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "1 method x load paths = 4 loads, 4 exact" in out
    # A line per output: y = W @ x + b for the seeded x, its bytes' digest the agent's.
    x = input_values("f32", 0, FEATURES)
    y = [
        sum(w * v for w, v in zip(WEIGHT[r * FEATURES : (r + 1) * FEATURES], x, strict=True))
        + BIAS[r]
        for r in range(FEATURES)
    ]
    line = f"  output 0: f32 [1, {FEATURES}] digest {digest_of(struct.pack('<4f', *y))}, "
    assert out.count(line) == 4, out


def test_the_backends_no_load_delegates_to_are_named_once(
    map_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The map's probes are no delegates of the XNNPACK-only program: ignored on each of the
    four loads, and said once."""
    argv = ["send", "--program", str(xnnpack_program()), "--options", str(map_file)]
    assert main([*argv, "--device", "host"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert out.count("ignored backends: ProbeA, ProbeB (in the map but not delegates") == 1
    assert "1 method x load paths = 4 loads, 4 exact" in out.splitlines()[-1]


def test_send_program_refusals_are_one_line(
    tmp_path: Path, map_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"\x00" * 64)
    assert main(["send", "--program", str(bad), "--device", "host"]) == 2
    err = capsys.readouterr().err.strip()
    assert "bad.pte: not an ExecuTorch program" in err and "\n" not in err
    # A delegate the device lacks (no probe declared): named, and how to fix it.
    argv = [
        "send",
        "--program",
        str(multi_delegate_program()),
        "--options",
        str(map_file),
        "--device",
        "host",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "method 'forward' delegates to 'ProbeA', which the device lacks" in err
    assert "\n" not in err


def test_the_suite_fails_where_the_device_cannot_load_the_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On an MCU board (no file system for a program file) ``--program``'s test fails with
    the line ``send`` gives; only the tests of the harness's XNNPACK program skip there."""
    require("qemu-system-arm")
    program = str(probe_program(("ProbeA",)))
    reason = "mcu-emu: the device has no file system to load a program file from"
    assert main(["send", "--program", program, "--probe", "ProbeA", "--device", "mcu-emu"]) == 2
    assert reason in capsys.readouterr().err
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites/test_user_program.py",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "--tb=line",
            "--device",
            "mcu-emu",
            "--program",
            program,
            "--probe",
            "ProbeA",
            "--results-dir",
            str(tmp_path / "results"),
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 2 skipped" in done.stdout and reason in done.stdout, done.stdout
    assert done.stdout.count("does not register backend 'XnnpackBackend'") == 2, done.stdout


# ---- damaged programs in the agent -----------------------------------------------------------


def _blob_range(data: bytes) -> range:
    """Where the XNNPACK delegate's blob sits in the program ``data``."""
    blob = delegate_blob(ensure_sdk(host_abi()))
    start = data.index(blob)
    return range(start, start + len(blob))


def damaged_programs(directory: Path, count: int) -> list[tuple[Path, tuple[str, ...]]]:
    """``count`` damaged copies of the multi-delegate program and of a probe program: bytes
    changed, runs overwritten, cut short. The XNNPACK blob itself is left alone: XNNPACK's
    init crashes on some damaged graphs (docs/agent.md), which is the backend's, not the
    agent's, to fix."""
    rng = random.Random(2222)
    sources = [
        (multi_delegate_program().read_bytes(), (*PROBES, XNNPACK_BACKEND)),
        (probe_program(PROBES).read_bytes(), PROBES),
    ]
    made = []
    for index in range(count):
        good, delegates = sources[index % 2]
        blob = _blob_range(good) if XNNPACK_BACKEND in delegates else range(0)
        places = [i for i in range(len(good)) if i not in blob]
        data = bytearray(good)
        kind = rng.randrange(3)
        if kind == 0:
            for _ in range(rng.randint(1, 12)):
                data[rng.choice(places)] = rng.randrange(256)
        elif kind == 1:
            data = data[: rng.randrange(len(data))]
        else:
            at = rng.choice(places[: len(places) - 8])
            data[at : at + 8] = rng.randbytes(8)
        path = directory / f"damaged-{index}.pte"
        path.write_bytes(bytes(data))
        made.append((path, delegates))
    return made


@pytest.mark.parametrize("sanitizer", [None, "thread"], ids=["plain", "tsan"])
def test_the_agent_survives_damaged_programs_on_every_load_path(
    tmp_path: Path, sanitizer: str | None
) -> None:
    """Each damaged program is loaded (round robin over the load paths); every LOAD gets
    a report, the agent then still answers HELLO and exits 0, and under ThreadSanitizer
    (the host-tsan profile's build) reports nothing."""
    build = ensure_agent("x86_64", sanitizer=sanitizer)
    programs = damaged_programs(tmp_path, 240)
    paths = list(LoadPath)
    options = OptionsMap.from_dict(
        {"ProbeA": {"k": 1}, XNNPACK_BACKEND: {"workspace_sharing_mode": 1}}
    )
    requests = [Request.register(PROBES)]
    for index, (path, delegates) in enumerate(programs):
        load_path = paths[index % len(paths)]
        method_options = options if load_path is LoadPath.MODULE_BOTH else None
        requests.append(
            Request.load(
                str(path), delegates, options, path=load_path, method_options=method_options
            )
        )
    requests.append(Request(Action.HELLO))
    stream = b"".join(wire.encode_request(r) for r in requests)
    env = {**os.environ, "TSAN_OPTIONS": "halt_on_error=1 exitcode=66"}
    done = subprocess.run(
        [str(build.binary)], input=stream, capture_output=True, timeout=600, env=env, check=False
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"agent exited {done.returncode}: {stderr[-3000:]}"
    assert "ThreadSanitizer" not in stderr
    reports = []
    offset = 0
    while offset < len(done.stdout):
        header = wire.peek_header(done.stdout[offset : offset + wire.HEADER_SIZE])
        reports.append(wire.decode_report(done.stdout[offset : offset + header.length]))
        offset += header.length
    assert len(reports) == len(requests)
    assert reports[-1].action is Action.HELLO and reports[-1].outcome is Outcome.OK
    loads = [r.outcome for r in reports[1:-1]]
    assert Outcome.RUNTIME_ERROR in loads and set(loads) <= {Outcome.OK, Outcome.RUNTIME_ERROR}
