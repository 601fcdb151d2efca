"""A program with a real XNNPACK delegate, generated without torch.

``forward(x) -> y`` is one ``DelegateCall`` to ``XnnpackBackend`` whose blob is a
one-node XNNPACK graph: ``y = x @ W.T + b`` (a fully connected layer, float32,
``x`` of shape ``[1, 4]``) with the weight ``W`` and the bias ``b`` as constant data
inside the blob. The blob is what XNNPACK's own serializer writes: an ``XNNGraph``
flatbuffer following the wheel's ``backends/xnnpack/serialization/schema.fbs``,
compiled by the wheel's ``flatc``, behind the header laid out in the wheel's
``xnnpack_graph_serialize.py`` (zeros, magic ``XH00``, header length, flatbuffer
offset and size, constant-data offset and size), each part padded to 16 bytes.

A fully connected node is chosen because XNNPACK packs its weight: with the weight
cache on, the packed weight goes through XNNPACK's weights cache (and, with a
``packed_cache_path``, into that file), which is an effect visible from outside
the backend. ``x`` and ``y`` are memory-planned: the agent sets ``x`` to its seeded values
(docs/agent.md, "Inputs"), so ``y`` is ``W @ x + b``, exact in float32 (:func:`expected_output`).

``xnnpack_program(("ProbeA",))`` puts probe delegates before the XNNPACK one (each
called on ``x``), so one program shows what a probe received next to what XNNPACK
did with the same map.
"""

from __future__ import annotations

import struct
from pathlib import Path

from harness.data.outputs import input_values
from harness.errors import UsageError
from harness.programs.flatc import FlatcError, cached_program, compile_json
from harness.programs.probe_program import MAX_DELEGATES, delegate_table, validate_delegates
from harness.runtime.wheel_sdk import SdkPaths, ensure_sdk, host_abi

XNNPACK_BACKEND = "XnnpackBackend"
FORMAT_REVISION = 1  # bump when the generated program changes shape

FEATURES = 4  # x: [1, FEATURES], W: [FEATURES, FEATURES], b: [FEATURES]
WEIGHT = tuple(float(i + 1) for i in range(FEATURES * FEATURES))  # row-major, 1..16
BIAS = (0.5, -1.5, 2.5, -3.5)

_ALIGNMENT = 16
_HEADER_MAGIC = b"XH00"
# 4 zero bytes, magic, u16 length, u32 flatbuffer offset and size, u32 constant-data
# offset, u64 constant-data size.
_HEADER_LENGTH = 30
_XNN_INVALID_VALUE_ID = 0xFFFFFFFF
_XNN_FLAG_EXTERNAL_INPUT = 0x1
_XNN_FLAG_EXTERNAL_OUTPUT = 0x2
_SCALAR_TYPE_FLOAT = "FLOAT"


class XnnpackProgramError(UsageError):
    """The XNNPACK program could not be generated."""


def xnnpack_program(probes: tuple[str, ...] = (), methods: tuple[str, ...] = ("forward",)) -> Path:
    """The path of the XNNPACK program, probe delegates ``probes`` first (generated once).

    Probe ids follow :func:`harness.programs.probe_program.probe_program`'s rules; at most 7,
    none of them ``XnnpackBackend``. Each of ``methods`` is the same graph under its
    own name (a multi-method, multi-delegate program, e.g. for ``et.check_program``).
    """
    probes = tuple(probes)
    methods = tuple(methods)
    if not methods or len(set(methods)) != len(methods) or not all(methods):
        raise ValueError(f"methods {methods!r}: give one or more distinct, non-empty names")
    validate_delegates(probes, min_count=0, max_count=MAX_DELEGATES - 1)
    if XNNPACK_BACKEND in probes:
        raise ValueError(f"the probes of an XNNPACK program cannot be named {XNNPACK_BACKEND}")
    sdk = ensure_sdk(host_abi())

    def generate() -> bytes:
        try:
            blob = delegate_blob(sdk)
            return compile_json(
                sdk.flatc,
                sdk.schema / "program.fbs",
                program_json(blob, probes, methods),
                "the XNNPACK program",
            )
        except FlatcError as exc:
            raise XnnpackProgramError(str(exc)) from None

    key: list = [FORMAT_REVISION, sdk.version, list(probes)]
    if methods != ("forward",):
        key.append(list(methods))
    return cached_program("xnnpack", key, generate)


def expected_output() -> str:
    """``y`` for the ``x`` the agent sets, as the agent's ``outputs`` fact prints it (every
    product and sum is exact in float32: ``x`` holds multiples of 1/64 below 1024)."""
    x = input_values("f32", 0, FEATURES)
    rows = (
        sum(w * v for w, v in zip(WEIGHT[r * FEATURES : (r + 1) * FEATURES], x, strict=True))
        + BIAS[r]
        for r in range(FEATURES)
    )
    return ",".join(f"{value:g}" for value in rows)


def graph_json() -> dict:
    """The ``XNNGraph`` as flatc JSON, following XNNPACK's ``schema.fbs``."""
    weight_bytes = 4 * len(WEIGHT)

    def tensor(
        id_out: int,
        dims: list[int],
        *,
        constant: int = 0,
        external: int = _XNN_INVALID_VALUE_ID,
        flags: int = 0,
    ) -> dict:
        return {
            "xvalue_union_type": "XNNTensorValue",
            "xvalue_union": {
                "datatype": "xnn_datatype_fp32",
                "num_dims": len(dims),
                "dims": dims,
                "constant_buffer_idx": constant,
                "external_id": external,
                "flags": flags,
                "id_out": id_out,
            },
        }

    return {
        "version": "0",
        "xnodes": [
            {
                "xnode_union_type": "XNNFullyConnected",
                "xnode_union": {
                    "input1_id": 0,
                    "filter_id": 1,
                    "bias_id": 2,
                    "output_id": 3,
                    "flags": 0,
                },
                "debug_handle": 0,
            }
        ],
        "xvalues": [
            tensor(0, [1, FEATURES], external=0, flags=_XNN_FLAG_EXTERNAL_INPUT),
            tensor(1, [FEATURES, FEATURES], constant=1),
            tensor(2, [FEATURES], constant=2),
            tensor(3, [1, FEATURES], external=1, flags=_XNN_FLAG_EXTERNAL_OUTPUT),
        ],
        "num_externs": 2,
        "input_ids": [0],
        "output_ids": [3],
        # Entry 0 stands for "not constant"; offsets are from the constant data's start.
        "constant_data": [
            {"offset": 0, "size": 0},
            {"offset": 0, "size": weight_bytes},
            {"offset": _padded(weight_bytes), "size": 4 * len(BIAS)},
        ],
    }


def constant_data() -> bytes:
    weight = struct.pack(f"<{len(WEIGHT)}f", *WEIGHT)
    return _pad(weight) + struct.pack(f"<{len(BIAS)}f", *BIAS)


def delegate_blob(sdk: SdkPaths) -> bytes:
    """The processed blob XnnpackBackend's ``init`` compiles: header, flatbuffer, constants."""
    flatbuffer = compile_json(sdk.flatc, sdk.xnnpack_schema, graph_json(), "the XNNPACK graph")
    constants = constant_data()
    header_size = _padded(_HEADER_LENGTH)
    constants_offset = header_size + _padded(len(flatbuffer))
    header = (
        b"\0\0\0\0"
        + _HEADER_MAGIC
        + struct.pack("<H", _HEADER_LENGTH)
        + struct.pack("<III", header_size, len(flatbuffer), constants_offset)
        + struct.pack("<Q", len(constants))
    )
    assert len(header) == _HEADER_LENGTH
    return _pad(header) + _pad(flatbuffer) + constants


def program_json(
    blob: bytes, probes: tuple[str, ...] = (), methods: tuple[str, ...] = ("forward",)
) -> dict:
    """The program as flatc JSON, following ``schema/program.fbs``."""
    delegates = (*probes, XNNPACK_BACKEND)
    return {
        "version": 0,
        "execution_plan": [_plan(name, delegates) for name in methods],
        "constant_buffer": [],
        "backend_delegate_data": [
            {
                "data": list(blob)
                if backend_id == XNNPACK_BACKEND
                else list(f"etb-probe delegate {index}".encode("ascii"))
            }
            for index, backend_id in enumerate(delegates)
        ],
        "segments": [],
        "constant_segment": {"segment_index": 0, "offsets": [0]},
    }


def _plan(name: str, delegates: tuple[str, ...]) -> dict:
    """Method ``name``: x in, y out, one chain calling each delegate in turn."""
    row_bytes = 4 * FEATURES
    return {
        "name": name,
        "values": [_planned_tensor(0), _planned_tensor(row_bytes)],
        "inputs": [0],
        "outputs": [1],
        "chains": [
            {
                "inputs": [0],
                "outputs": [1],
                "instructions": [_delegate_call(delegates, i) for i in range(len(delegates))],
            }
        ],
        "operators": [],
        "delegates": delegate_table(delegates),
        # Buffer 0 is reserved by the runtime; buffer 1 holds x and y.
        "non_const_buffer_sizes": [0, 2 * row_bytes],
    }


def _delegate_call(delegates: tuple[str, ...], index: int) -> dict:
    """The instruction calling delegate ``index`` (XNNPACK's takes x and y, a probe x)."""
    args = [0, 1] if delegates[index] == XNNPACK_BACKEND else [0]
    return {
        "instr_args_type": "DelegateCall",
        "instr_args": {"delegate_index": index, "args": args},
    }


def _planned_tensor(offset: int) -> dict:
    """A 1 x FEATURES float tensor in planned memory at ``offset``."""
    return {
        "val_type": "Tensor",
        "val": {
            "scalar_type": _SCALAR_TYPE_FLOAT,
            "storage_offset": 0,
            "sizes": [1, FEATURES],
            "dim_order": [0, 1],
            "requires_grad": False,
            "data_buffer_idx": 0,
            "allocation_info": {
                "memory_id": 1,
                "memory_offset_low": offset,
                "memory_offset_high": 0,
            },
            "shape_dynamism": "STATIC",
        },
    }


def _padded(size: int) -> int:
    return -(-size // _ALIGNMENT) * _ALIGNMENT


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (_padded(len(data)) - len(data))
