"""The XNNPACK program, generated without torch: its flatbuffers decoded back by flatc.

The program is decoded with the wheel's ``program.fbs`` and its delegate blob's
``XNNGraph`` with XNNPACK's ``schema.fbs``, so the tests read the bytes, not the
generator's intent. That the real runtime loads it and XNNPACK computes with it is
shown in suites/test_xnnpack.py and tests/system/test_sdk_prefix.py.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.programs.xnnpack import (
    BIAS,
    WEIGHT,
    XNNPACK_BACKEND,
    expected_output,
    xnnpack_program,
)
from harness.runtime.wheel_sdk import ensure_sdk, host_abi


def decode(data: bytes, schema: Path, tmp_path: Path, name: str) -> dict[str, Any]:
    """``data`` as JSON, decoded by the wheel's flatc against ``schema``."""
    source = tmp_path / f"{name}.bin"
    source.write_bytes(data)
    flatc = ensure_sdk(host_abi()).flatc
    subprocess.run(
        [str(flatc), "--json", "--strict-json", "--raw-binary", "--defaults-json",
         "-o", str(tmp_path), str(schema), "--", str(source)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))


def test_program_calls_the_probes_then_xnnpack_on_planned_tensors(tmp_path: Path) -> None:
    sdk = ensure_sdk(host_abi())
    program = decode(
        xnnpack_program(("ProbeA",)).read_bytes(), sdk.schema / "program.fbs", tmp_path, "program"
    )
    (plan,) = program["execution_plan"]
    assert [d["id"] for d in plan["delegates"]] == ["ProbeA", XNNPACK_BACKEND]
    calls = [
        (i["instr_args"]["delegate_index"], i["instr_args"]["args"])
        for i in plan["chains"][0]["instructions"]
    ]
    assert calls == [(0, [0]), (1, [0, 1])]
    assert (plan["inputs"], plan["outputs"]) == ([0], [1])
    tensors = [v["val"] for v in plan["values"]]
    assert [t["allocation_info"]["memory_offset_low"] for t in tensors] == [0, 16]
    assert all(t["sizes"] == [1, 4] and t["scalar_type"] == "FLOAT" for t in tensors)
    assert plan["non_const_buffer_sizes"] == [0, 32]
    assert program["constant_segment"]["offsets"] == [0]


def test_blob_has_xnnpacks_header_graph_and_constants(tmp_path: Path) -> None:
    sdk = ensure_sdk(host_abi())
    program = decode(
        xnnpack_program().read_bytes(), sdk.schema / "program.fbs", tmp_path, "program"
    )
    blob = bytes(program["backend_delegate_data"][0]["data"])
    assert blob[:4] == b"\0\0\0\0" and blob[4:8] == b"XH00"
    (length,) = struct.unpack_from("<H", blob, 8)
    fb_offset, fb_size, constants_offset = struct.unpack_from("<III", blob, 10)
    (constants_size,) = struct.unpack_from("<Q", blob, 22)
    assert (length, fb_offset) == (30, 32)
    assert constants_offset == fb_offset + -(-fb_size // 16) * 16
    assert constants_size == len(blob) - constants_offset == 4 * (16 + 4)
    flatbuffer = blob[fb_offset : fb_offset + fb_size]
    assert flatbuffer[4:8] == b"XN01"  # schema.fbs's file_identifier
    graph = decode(flatbuffer, sdk.xnnpack_schema, tmp_path, "graph")
    (node,) = graph["xnodes"]
    assert node["xnode_union_type"] == "XNNFullyConnected"
    assert {
        k: node["xnode_union"][k] for k in ("input1_id", "filter_id", "bias_id", "output_id")
    } == {"input1_id": 0, "filter_id": 1, "bias_id": 2, "output_id": 3}
    flags = [v["xvalue_union"]["flags"] for v in graph["xvalues"]]
    assert flags == [1, 0, 0, 2]  # external input, constants, external output
    assert (graph["input_ids"], graph["output_ids"], graph["num_externs"]) == ([0], [3], 2)
    constants = blob[constants_offset:]
    weight, bias = graph["constant_data"][1], graph["constant_data"][2]
    assert struct.unpack_from("<16f", constants, weight["offset"]) == WEIGHT
    assert struct.unpack_from("<4f", constants, bias["offset"]) == BIAS


def test_expected_output_is_w_times_the_seeded_x_plus_the_bias() -> None:
    # x = -1.703125, 814, -1.484375, -2.21875 (docs/agent.md, "Inputs"); row 0:
    # -1.703125 + 2 * 814 - 3 * 1.484375 - 4 * 2.21875 + 0.5 = 1613.46875
    assert expected_output() == "1613.47,4845.84,8084.22,11312.6"


def test_programs_are_cached_per_probe_tuple() -> None:
    assert xnnpack_program(("ProbeA",)) == xnnpack_program(("ProbeA",))
    assert xnnpack_program(("ProbeA",)) != xnnpack_program(("ProbeB",))


@pytest.mark.parametrize("probes", [(XNNPACK_BACKEND,), tuple(f"P{i}" for i in range(8)), ("",)])
def test_probe_tuples_it_cannot_carry_are_refused(probes) -> None:
    with pytest.raises(ValueError):
        xnnpack_program(probes)
