"""Export the project's own small real programs (``tests/programs/*.pte``).

Run with the pinned versions of ``requirements.txt`` beside this file, in a virtual
environment of its own (the harness never depends on torch):

    python3 -m venv /tmp/export-venv
    /tmp/export-venv/bin/pip install -r tests/programs/requirements.txt
    /tmp/export-venv/bin/python tests/programs/export.py            # write the programs
    /tmp/export-venv/bin/python tests/programs/export.py --check    # compare, write nothing

Each program is a small model exported by ``torch.export`` and lowered by ExecuTorch as a
user would (``to_edge_transform_and_lower`` with the XNNPACK partitioner where it is
delegated, then ``to_executorch``), with fixed weights, so exporting again gives the same
bytes; ``--check`` exports into memory and says which file differs. ``outputs.json`` holds
what torch computes for each method from the inputs the agent gives (its seeded values,
docs/agent.md "Inputs", reproduced by ``harness.data.outputs.input_values``),
``SHA256SUMS`` the digests the tests compare the committed files with. The zoo
(``zoo.py``: one program per operator family XNNPACK's partitioner takes, some quantized
with ``XNNPACKQuantizer``) goes to ``zoo/`` with its own ``outputs.json`` and
``SHA256SUMS``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from executorch.exir import to_edge_transform_and_lower
from torch.export import export
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the checkout's harness: pure-Python data only
from zoo import Entry, zoo  # noqa: E402  (beside this script)

from harness.data.outputs import input_values  # noqa: E402

OUTPUTS = "outputs.json"
SUMS = "SHA256SUMS"
ZOO = "zoo"


def _seeded_linear(features: int, seed: int) -> torch.nn.Linear:
    """A linear layer with weights fixed by ``seed``, so every export has the same bytes."""
    generator = torch.Generator().manual_seed(seed)
    layer = torch.nn.Linear(features, features)
    with torch.no_grad():
        layer.weight.copy_(torch.rand(features, features, generator=generator) - 0.5)
        layer.bias.copy_(torch.rand(features, generator=generator) - 0.5)
    return layer


class LinearReluCumsum(torch.nn.Module):
    """linear -> relu -> cumsum: XNNPACK takes the first two, never cumsum."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = _seeded_linear(8, seed=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(torch.relu(self.linear(x)), dim=1)


class LinearCumsumLinear(torch.nn.Module):
    """linear -> cumsum -> linear: two XNNPACK partitions with a portable operator between."""

    def __init__(self) -> None:
        super().__init__()
        self.first = _seeded_linear(8, seed=2)
        self.second = _seeded_linear(8, seed=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.cumsum(self.first(x), dim=1))


class LinearRelu(torch.nn.Module):
    """linear -> relu: all of it XNNPACK's."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = _seeded_linear(8, seed=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


class ScaleCumsum(torch.nn.Module):
    """x * 2 -> cumsum: XNNPACK takes the multiplication, not cumsum."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x * 2.0, dim=1)


def _define_custom_op() -> torch.library.Library:
    """``et_harness::double`` and its out variant: an operator of the user's own, which no
    kernel library the agent links registers (as a user's custom op the agent was not
    built with)."""
    library = torch.library.Library("et_harness", "DEF")
    library.define("double(Tensor x) -> Tensor")
    library.define("double.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")

    def double_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return out.copy_(x * 2)

    library.impl("double", lambda x: x * 2, "CompositeExplicitAutograd")
    library.impl("double.out", double_out, "CompositeExplicitAutograd")
    return library


_CUSTOM_OPS = _define_custom_op()


class ReluDouble(torch.nn.Module):
    """relu -> et_harness::double: an operator no kernel library has."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.et_harness.double(torch.relu(x))


_INPUT = (torch.ones(1, 8),)  # the shape export traces with
# What the agent feeds every method: input 0, a float tensor [1, 8].
_AGENT_INPUT = (torch.tensor([input_values("f32", 0, 8)], dtype=torch.float32),)


def _lower(methods: dict[str, torch.nn.Module], delegated: bool) -> bytes:
    exported = {name: export(m.eval(), _INPUT, strict=True) for name, m in methods.items()}
    partitioner = [XnnpackPartitioner()] if delegated else []
    edge = to_edge_transform_and_lower(exported, partitioner=partitioner)
    return edge.to_executorch().buffer


def _programs() -> dict[str, tuple[dict[str, torch.nn.Module], bool]]:
    """Each file's methods, and whether it is lowered to XNNPACK."""
    return {
        # An operator of the user's own that the agent has no kernel for: named when it fails.
        "custom_op.pte": ({"forward": ReluDouble()}, False),
        # No delegate: every operator runs on the agent's kernels.
        "not_delegated.pte": ({"forward": LinearReluCumsum()}, False),
        # Two XNNPACK delegates with a portable cumsum between them.
        "partly_delegated.pte": ({"forward": LinearCumsumLinear()}, True),
        # Two methods: one all XNNPACK, one partly.
        "two_methods.pte": ({"forward": LinearRelu(), "scaled": ScaleCumsum()}, True),
        # One XNNPACK delegate holds the whole graph.
        "xnnpack.pte": ({"forward": LinearRelu()}, True),
    }


def _agent_inputs(shapes: tuple[tuple[int, ...], ...]) -> tuple[torch.Tensor, ...]:
    """What the agent feeds a method whose float inputs have ``shapes``."""
    return tuple(
        torch.tensor(input_values("f32", index, math.prod(shape)), dtype=torch.float32).reshape(
            shape
        )
        for index, shape in enumerate(shapes)
    )


def _quantized(entry: Entry, inputs: tuple[torch.Tensor, ...]) -> torch.nn.Module:
    """``entry``'s module quantized as XNNPACKQuantizer does it for a user (per channel;
    a static one calibrated on the agent's inputs)."""
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(
            is_per_channel=True, is_dynamic=entry.quantized == "dynamic"
        )
    )
    prepared = prepare_pt2e(export(entry.module, inputs, strict=True).module(), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def _zoo_program(entry: Entry) -> tuple[bytes, list[float]]:
    """One zoo program lowered to XNNPACK, and what torch computes from the agent's inputs."""
    inputs = _agent_inputs(entry.shapes)
    module = entry.module if entry.quantized is None else _quantized(entry, inputs)
    edge = to_edge_transform_and_lower(
        export(module, inputs, strict=True), partitioner=[XnnpackPartitioner()]
    )
    with torch.no_grad():
        expected = module(*inputs).flatten().tolist()
    return edge.to_executorch().buffer, expected


def _with_outputs_and_sums(
    files: dict[str, bytes], outputs: dict[str, dict[str, list[float]]], folder: str = ""
) -> dict[str, bytes]:
    """``files`` with ``outputs.json`` and ``SHA256SUMS`` beside them in ``folder``."""
    files[OUTPUTS] = (json.dumps(outputs, indent=1, sort_keys=True) + "\n").encode()
    files[SUMS] = "".join(
        f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(files.items())
    ).encode()
    return {f"{folder}/{name}" if folder else name: data for name, data in files.items()}


def export_all() -> dict[str, bytes]:
    """Every file this script writes, by path below this folder: the programs, what torch
    computes for each method from the agent's inputs (its seeded values), and their
    digests; the zoo's in ``zoo/``, each a ``forward``."""
    files = {}
    outputs: dict[str, dict[str, list[float]]] = {}
    for name, (methods, delegated) in _programs().items():
        files[name] = _lower(methods, delegated)
        with torch.no_grad():
            outputs[name] = {
                method: module(*_AGENT_INPUT).flatten().tolist()
                for method, module in methods.items()
            }
    zoo_files: dict[str, bytes] = {}
    zoo_outputs: dict[str, dict[str, list[float]]] = {}
    for name, entry in zoo().items():
        zoo_files[name], expected = _zoo_program(entry)
        zoo_outputs[name] = {"forward": expected}
    return _with_outputs_and_sums(files, outputs) | _with_outputs_and_sums(
        zoo_files, zoo_outputs, ZOO
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="export into memory and compare with the files"
    )
    args = parser.parse_args(argv)
    files = export_all()
    if args.check:
        differing = [
            name
            for name, data in files.items()
            if not (HERE / name).is_file() or (HERE / name).read_bytes() != data
        ]
        for name in differing:
            print(f"{name}: exporting again gives other bytes", file=sys.stderr)
        if not differing:
            print(f"{len(files)} files: exporting again gives the same bytes")
        return 1 if differing else 0
    (HERE / ZOO).mkdir(exist_ok=True)
    for name, data in files.items():
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
