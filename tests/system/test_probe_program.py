"""Probe programs, generated without torch by the wheel's flatc.

Each generated ``.pte`` is decoded back to JSON with the same flatc and schema,
so the tests check the flatbuffer itself, not the generator's intent. That the
real runtime loads them is shown in tests/system/test_agent_host.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.programs.probe_program import probe_program
from harness.runtime.wheel_sdk import ensure_sdk, host_abi


def decode(program: Path, tmp_path: Path) -> dict[str, Any]:
    """The program as JSON, decoded by flatc against the wheel's schema."""
    sdk = ensure_sdk(host_abi())
    subprocess.run(
        [str(sdk.flatc), "--json", "--strict-json", "--raw-binary", "--defaults-json",
         "-o", str(tmp_path), str(sdk.schema / "program.fbs"), "--", str(program)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return json.loads((tmp_path / f"{program.stem}.json").read_text(encoding="utf-8"))


def delegate_calls(plan: dict[str, Any]) -> list[tuple[int, list[int]]]:
    return [
        (i["instr_args"]["delegate_index"], i["instr_args"]["args"])
        for i in plan["chains"][0]["instructions"]
    ]


def test_one_delegate(tmp_path: Path) -> None:
    program = probe_program(("ProbeA",))
    data = program.read_bytes()
    assert data[4:8] == b"ET12"  # the schema's file identifier
    decoded = decode(program, tmp_path)
    plan, second = decoded["execution_plan"]
    assert (plan["name"], second["name"]) == ("forward", "second")
    # second calls the same delegates, sharing their blobs.
    assert {k: v for k, v in second.items() if k != "name"} == {
        k: v for k, v in plan.items() if k != "name"
    }
    assert [d["id"] for d in plan["delegates"]] == ["ProbeA"]
    assert plan["delegates"][0]["processed"] == {"location": "INLINE", "index": 0}
    assert delegate_calls(plan) == [(0, [0])]
    assert plan["values"] == [{"val_type": "Int", "val": {"int_val": 0}}]
    # The runtime refuses a program without this placeholder.
    assert decoded["constant_segment"]["offsets"] == [0]


def test_eight_delegates_in_order_with_duplicates(tmp_path: Path) -> None:
    ids = ("A", "B", "C", "D", "E", "F", "G", "A")
    plan = decode(probe_program(ids), tmp_path)["execution_plan"][0]
    assert tuple(d["id"] for d in plan["delegates"]) == ids
    assert delegate_calls(plan) == [(i, [0]) for i in range(8)]
    assert len(decode(probe_program(ids), tmp_path)["backend_delegate_data"]) == 8


def test_unicode_and_limit_length_ids(tmp_path: Path) -> None:
    ids = ("Проба 🙂 テスト", "x" * 63, "é" * 31)
    program = probe_program(ids)
    assert (
        tuple(d["id"] for d in decode(program, tmp_path)["execution_plan"][0]["delegates"]) == ids
    )


def test_cache_hit_returns_the_same_file_untouched() -> None:
    first = probe_program(("CacheProbe", "Other"))
    stamp = first.stat().st_mtime_ns
    again = probe_program(("CacheProbe", "Other"))
    assert again == first and again.stat().st_mtime_ns == stamp
    assert probe_program(("Other", "CacheProbe")) != first  # order is part of the key


@pytest.mark.parametrize(
    "ids",
    [(), tuple("ABCDEFGHI"), ("",), ("x" * 64,), ("a\0b",), ("é" * 32,)],
    ids=["none", "nine", "empty-id", "64-bytes", "nul", "64-bytes-utf8"],
)
def test_out_of_range_delegates_are_refused(ids: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="delegate"):
        probe_program(ids)
