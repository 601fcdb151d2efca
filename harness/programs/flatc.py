"""Flatbuffers from JSON with the wheel's own ``flatc``, and the cache of generated programs.

Programs the harness loads are written as JSON following a schema the wheel
ships and compiled by the wheel's ``flatc`` (no torch). :func:`compile_json`
does one compilation; :func:`cached_program` generates a program once per key
under the harness cache, safely from parallel processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.errors import UsageError
from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import CacheEntry
from harness.lifecycle.disk import writing

_FLATC_TIMEOUT_S = 60


class FlatcError(UsageError):
    """``flatc`` could not compile a generated flatbuffer."""


def compile_json(flatc: Path, schema: Path, data: object, what: str) -> bytes:
    """The flatbuffer ``schema`` makes of ``data`` (a JSON-able object); ``what`` names it."""
    with tempfile.TemporaryDirectory(prefix=".flatc-", dir=_programs_dir()) as tmp:
        source = Path(tmp) / "data.json"
        source.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        argv = [str(flatc), "--binary", "-o", tmp, str(schema), str(source)]
        try:
            result = subprocess.run(
                argv, capture_output=True, text=True, timeout=_FLATC_TIMEOUT_S, check=False
            )
        except OSError as exc:
            raise FlatcError(f"cannot run {flatc}: {exc}") from None
        except subprocess.TimeoutExpired:
            raise FlatcError(f"flatc took over {_FLATC_TIMEOUT_S} s compiling {what}") from None
        outputs = [p for p in Path(tmp).iterdir() if p.name.startswith("data.") and p != source]
        if result.returncode != 0 or len(outputs) != 1:
            raise FlatcError(
                f"flatc failed (exit code {result.returncode}) compiling {what} with "
                f"{schema.name}: {result.stderr.strip() or result.stdout.strip()}"
            )
        return outputs[0].read_bytes()


def cached_program(kind: str, key: object, generate: Callable[[], bytes]) -> Path:
    """``programs/<kind>-<hash of key>.pte`` in the cache, written by ``generate`` on first use."""
    text = json.dumps(key, ensure_ascii=True, sort_keys=True)
    digest = hashlib.sha256(text.encode("ascii")).hexdigest()[:24]
    target = _programs_dir() / f"{kind}-{digest}.pte"
    entry = CacheEntry("program", target)
    if not entry.use():
        with entry.building(adopt=target.is_file) as intact:
            if not intact:
                sink = tempfile.NamedTemporaryFile(
                    dir=target.parent, prefix=f".{kind}-", delete=False
                )
                try:
                    with writing(target.parent, f"writing the {kind} program"), sink:
                        sink.write(generate())
                    os.replace(sink.name, target)
                except BaseException:
                    Path(sink.name).unlink(missing_ok=True)
                    raise
                entry.commit()
    return target


def _programs_dir() -> Path:
    path = cache_root() / "programs"
    with writing(path, "writing a generated program"):
        path.mkdir(parents=True, exist_ok=True)
    return path
