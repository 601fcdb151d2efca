"""The golden vectors in tests/vectors (messages) and tests/vectors/stream (byte streams)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

VECTORS = Path(__file__).resolve().parent / "vectors"
STREAMS = VECTORS / "stream"
UPLOAD_ACTIONS = ("program_data", "program_end")


def vector_names(folder: Path = VECTORS) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.json"))


def load_vector(name: str, folder: Path = VECTORS) -> tuple[bytes, dict[str, Any]]:
    """A vector's bytes and what its JSON twin says of them."""
    data = (folder / f"{name}.bin").read_bytes()
    return data, json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))


def decoder_kind(readable: dict[str, Any]) -> str:
    """The decoder a valid vector is read with: actions 9 and 10 have their own."""
    if readable["type"] == "request" and readable["action"] in UPLOAD_ACTIONS:
        return "upload"
    return str(readable["type"])


def load_generator() -> ModuleType:
    """tests/vectors/generate.py, which writes every vector (run it after a wire change)."""
    spec = importlib.util.spec_from_file_location("vector_generator", VECTORS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
