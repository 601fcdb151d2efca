"""The golden vectors in tests/vectors against harness.codec.wire, and against their generator."""

from __future__ import annotations

import json

import pytest
from golden_vectors import (
    UPLOAD_ACTIONS,
    VECTORS,
    decoder_kind,
    load_generator,
    load_vector,
    vector_names,
)

from harness.codec.readable import from_readable, to_readable
from harness.codec.wire import (
    WireError,
    WireErrorCode,
    decode_report,
    decode_request,
    encode_report,
    encode_request,
)
from harness.codec.wire.program_messages import (
    ProgramData,
    ProgramEnd,
    ProgramUpload,
    decode_upload,
    encode_upload,
)
from harness.data.messages import Report, Request


def decode(data: bytes, kind: object) -> Request | Report | ProgramUpload:
    assert kind in ("request", "report", "upload"), kind
    if kind == "upload":
        return decode_upload(data)
    return decode_request(data) if kind == "request" else decode_report(data)


def encode(msg: Request | Report | ProgramUpload) -> bytes:
    if isinstance(msg, (ProgramData, ProgramEnd)):
        return encode_upload(msg)
    return encode_request(msg) if isinstance(msg, Request) else encode_report(msg)


def test_committed_vectors_are_what_generate_py_writes() -> None:
    expected = load_generator().expected_files()
    committed = {p.name: p.read_bytes() for p in VECTORS.iterdir() if p.suffix in (".bin", ".json")}
    assert sorted(committed) == sorted(expected), "run: python tests/vectors/generate.py"
    changed = [name for name in expected if committed[name] != expected[name]]
    assert not changed, f"stale vectors {changed}; run: python tests/vectors/generate.py"


def test_vectors_cover_every_error_bytes_can_produce() -> None:
    errors = {load_vector(name)[1].get("error") for name in vector_names()}
    expected = {code.name for code in WireErrorCode} - {"OK", "CAPACITY"}
    assert expected <= errors, f"no vector for {sorted(expected - errors)}"


def test_vectors_cover_every_action_in_both_directions() -> None:
    seen = {
        (readable["type"], readable["action"])
        for readable in (load_vector(name)[1] for name in vector_names())
        if "error" not in readable
    }
    actions = {"load", "execute", "set", "get", "reset", "register", "hello", "reboot"}
    actions |= set(UPLOAD_ACTIONS)
    assert {a for t, a in seen if t == "request"} == actions
    assert {a for t, a in seen if t == "report"} == actions | {"none"}


@pytest.mark.parametrize("name", vector_names())
def test_vector(name: str) -> None:
    data, expected = load_vector(name)
    if "error" in expected:
        assert set(expected) == {"error", "expect", "about"}
        with pytest.raises(WireError) as info:
            decode(data, expected["expect"])
        assert info.value.code.name == expected["error"], str(info.value)
        return
    msg = decode(data, decoder_kind(expected))
    readable = to_readable(msg)
    # json.dumps tells true from 1, which == on dicts does not.
    assert json.dumps(readable) == json.dumps(expected)
    assert encode(msg) == data
    assert encode(from_readable(expected)) == data
