"""The zoo: one small program per operator family XNNPACK's partitioner takes, each with
fixed weights (``export.py`` lowers them into ``zoo/``; torch and executorch only).

Every entry is a module, the shapes of its float inputs and how it is quantized:
``None`` (float), ``"dynamic"`` (dynamically quantized, per channel) or ``"static"``
(statically quantized, per channel, calibrated on the agent's own seeded inputs), as
``XNNPACKQuantizer`` does it for a user."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


def seeded(module: nn.Module, seed: int) -> nn.Module:
    """``module`` with every parameter drawn from ``seed`` (uniform in [-0.5, 0.5)), so
    every export has the same bytes."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.rand(parameter.shape, generator=generator) - 0.5)
    return module.eval()


class Unary(nn.Module):
    """One function of one input."""

    def __init__(self, function: object) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)  # type: ignore[operator]


class Binary(nn.Module):
    """One function of two inputs."""

    def __init__(self, function: object) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.function(x, y)  # type: ignore[operator]


class ConvRelu(nn.Module):
    """conv2d -> relu, the commonest pair."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class LinearStack(nn.Module):
    """linear -> hardtanh -> linear: what quantized linear is made of."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(16, 16)
        self.second = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(nn.functional.hardtanh(self.first(x)))


class Attention(nn.Module):
    """A small attention head: linear projections, matmul, softmax, permute."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(8, dim=-1)
        scores = torch.softmax(torch.matmul(q, k.permute(0, 2, 1)) / 4.0, dim=-1)
        return torch.matmul(scores, v)


@dataclass(frozen=True)
class Entry:
    """A zoo program: its module, the shapes of its float inputs and its quantization."""

    module: nn.Module
    shapes: tuple[tuple[int, ...], ...]
    quantized: str | None = None


def _unary(function: object, shape: tuple[int, ...] = (1, 16)) -> Entry:
    return Entry(Unary(function), (shape,))


_IMAGE = (1, 4, 4, 4)  # 64 elements: outputs stay within the 120 whose elements travel


def zoo() -> dict[str, Entry]:
    """Every zoo program by file name."""
    f = nn.functional
    return {
        "conv1d.pte": Entry(seeded(nn.Conv1d(4, 6, 3, padding=1), 10), ((1, 4, 12),)),
        "conv2d_relu.pte": Entry(seeded(ConvRelu(), 11), ((1, 3, 4, 4),)),
        "conv2d_depthwise.pte": Entry(
            seeded(nn.Conv2d(4, 4, 3, padding=1, groups=4), 12), (_IMAGE,)
        ),
        "conv_transpose2d.pte": Entry(
            seeded(nn.ConvTranspose2d(4, 2, 3, stride=2), 13), ((1, 4, 3, 3),)
        ),
        "linear.pte": Entry(seeded(LinearStack(), 14), ((1, 16),)),
        "matmul.pte": Entry(Binary(torch.matmul), ((1, 4, 8), (1, 8, 4))),
        "attention.pte": Entry(seeded(Attention(), 15), ((1, 4, 8),)),
        "relu.pte": _unary(torch.relu),
        "relu6.pte": _unary(f.relu6),
        "hardtanh.pte": _unary(lambda x: f.hardtanh(x, -2.0, 3.0)),
        "clamp.pte": _unary(lambda x: torch.clamp(x, -1.5, 2.5)),
        "sigmoid.pte": _unary(torch.sigmoid),
        "tanh.pte": _unary(torch.tanh),
        "gelu.pte": _unary(f.gelu),
        "hardswish.pte": _unary(f.hardswish),
        "leaky_relu.pte": _unary(lambda x: f.leaky_relu(x, 0.1)),
        "prelu.pte": Entry(seeded(nn.PReLU(4), 16), (_IMAGE,)),
        "max_pool2d.pte": _unary(lambda x: f.max_pool2d(x, 2), _IMAGE),
        "avg_pool2d.pte": _unary(lambda x: f.avg_pool2d(x, 2), _IMAGE),
        "elementwise.pte": Entry(
            Binary(lambda x, y: torch.maximum(x * y - x, y) / (torch.abs(x) + 1.0) + y),
            ((1, 16), (1, 16)),
        ),
        "softmax.pte": _unary(lambda x: torch.softmax(x, dim=-1), (2, 8)),
        "cat.pte": Entry(Binary(lambda x, y: torch.cat((x, y * 2.0), dim=1)), ((1, 8), (1, 6))),
        "slice.pte": _unary(lambda x: x[:, 1:7, :] * 3.0, (1, 8, 4)),
        "pad.pte": _unary(lambda x: f.pad(x, (1, 2, 0, 1), value=0.5), (1, 2, 4, 4)),
        "permute.pte": _unary(lambda x: x.permute(0, 2, 3, 1) + 1.0, _IMAGE),
        "mean.pte": _unary(lambda x: torch.mean(x, dim=(2, 3), keepdim=True), _IMAGE),
        "upsample_bilinear2d.pte": _unary(
            lambda x: f.interpolate(x, scale_factor=2.0, mode="bilinear"), (1, 2, 3, 3)
        ),
        "linear_dynamic_qint8.pte": Entry(seeded(LinearStack(), 17), ((1, 16),), "dynamic"),
        "linear_static_qint8.pte": Entry(seeded(LinearStack(), 18), ((1, 16),), "static"),
        "conv2d_static_qint8.pte": Entry(seeded(ConvRelu(), 19), ((1, 3, 4, 4),), "static"),
    }
