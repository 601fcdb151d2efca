"""Probe programs: ``.pte`` files whose methods only call delegates.

A probe program has two methods, ``forward`` and ``second``, each holding a single
``Int`` value and one ``DelegateCall`` instruction per delegate, in order, each on
that value. ``second`` lets a case load a method into a program or module whose
``forward`` is already loaded (LOAD with KEEP). No
torch is needed: the program is written as JSON following the wheel's
``schema/program.fbs`` and compiled to a flatbuffer by the wheel's own ``flatc``.
Loading it makes the runtime ``init`` each delegate's backend with that backend's
entry of the ``LoadBackendOptionsMap``; executing it calls each ``execute``.

Programs are cached by their delegate tuple under the harness cache
(:func:`harness.programs.flatc.cached_program`).
"""

from __future__ import annotations

from pathlib import Path

from harness.data.options import MAX_ID_BYTES
from harness.errors import UsageError
from harness.programs.flatc import FlatcError, cached_program, compile_json
from harness.runtime.wheel_sdk import ensure_sdk, host_abi

MAX_DELEGATES = 8  # wire format v2: delegate_count limit
FORMAT_REVISION = 2  # bump when the generated program changes shape
METHODS = ("forward", "second")


class ProbeProgramError(UsageError):
    """A probe program could not be generated."""


def probe_program(delegates: tuple[str, ...], *, min_count: int = 1) -> Path:
    """The path of a probe program calling ``delegates`` in order (generated once).

    Each id is 1..63 bytes of UTF-8 without NUL; ``min_count`` (1, or 0 for a program
    that calls no delegate)..8 ids, duplicates allowed.
    """
    delegates = tuple(delegates)
    validate_delegates(delegates, min_count)
    sdk = ensure_sdk(host_abi())

    def generate() -> bytes:
        try:
            return compile_json(
                sdk.flatc,
                sdk.schema / "program.fbs",
                program_json(delegates),
                f"a probe program for {delegates!r}",
            )
        except FlatcError as exc:
            raise ProbeProgramError(str(exc)) from None

    return cached_program("probe", [FORMAT_REVISION, sdk.version, list(delegates)], generate)


def program_json(delegates: tuple[str, ...]) -> dict:
    """The program as flatc JSON, following ``schema/program.fbs``."""
    return {
        "version": 0,
        "execution_plan": [_method_json(name, delegates) for name in METHODS],
        "constant_buffer": [],
        "backend_delegate_data": [
            {"data": list(f"etb-probe delegate {index}".encode("ascii"))}
            for index in range(len(delegates))
        ],
        "segments": [],
        # The runtime refuses a program without constant data unless this
        # (empty) placeholder is present: offsets [0] means "no constants".
        "constant_segment": {"segment_index": 0, "offsets": [0]},
    }


def _method_json(name: str, delegates: tuple[str, ...]) -> dict:
    """One method calling ``delegates`` in order; their blobs are shared by all methods."""
    return {
        "name": name,
        "values": [{"val_type": "Int", "val": {"int_val": 0}}],
        "inputs": [],
        "outputs": [0],
        "chains": [
            {
                "inputs": [],
                "outputs": [0],
                "instructions": [
                    {
                        "instr_args_type": "DelegateCall",
                        "instr_args": {"delegate_index": index, "args": [0]},
                    }
                    for index in range(len(delegates))
                ],
            }
        ],
        "operators": [],
        "delegates": delegate_table(delegates),
        # Buffer 0 is reserved by the runtime; no memory-planned tensors.
        "non_const_buffer_sizes": [0],
    }


def delegate_table(delegates: tuple[str, ...]) -> list[dict]:
    """A method's delegate table: ``delegates`` in order, the blob of each inline at the
    same index of the program's ``backend_delegate_data``."""
    return [
        {
            "id": backend_id,
            "processed": {"location": "INLINE", "index": index},
            "compile_specs": [],
        }
        for index, backend_id in enumerate(delegates)
    ]


def validate_delegates(
    delegates: tuple[str, ...], min_count: int = 1, max_count: int = MAX_DELEGATES
) -> None:
    """Refuse a delegate tuple a generated program cannot carry (ValueError, TypeError)."""
    if not min_count <= len(delegates) <= max_count:
        raise ValueError(
            f"this program calls {min_count}..{max_count} probe delegates; got {len(delegates)}"
        )
    for index, backend_id in enumerate(delegates):
        if type(backend_id) is not str:
            raise TypeError(f"delegates[{index}] must be a str; got {backend_id!r}")
        try:
            size = len(backend_id.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError(f"delegates[{index}] is not valid UTF-8: {backend_id!r}") from None
        if not 1 <= size <= MAX_ID_BYTES or "\0" in backend_id:
            raise ValueError(
                f"delegates[{index}] must be 1..{MAX_ID_BYTES} bytes of UTF-8 without NUL; "
                f"got {size} bytes: {backend_id!r}"
            )
