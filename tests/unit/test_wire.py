"""harness.codec.wire: the header, error reporting, checked and unchecked encoding, readable
form."""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.codec.readable import ReadableFormError, from_readable, to_readable
from harness.codec.wire import (
    MAX_MESSAGE,
    Header,
    MessageType,
    WireError,
    WireErrorCode,
    WireVersionError,
    decode_report,
    decode_request,
    encode_report,
    encode_request,
    peek_header,
    seal,
)
from harness.data.messages import Action, Outcome, Report, ReportEntry, Request
from harness.data.options import INT32_MAX, INT32_MIN, BackendOptions, Option, OptionsMap

SPEC = Path(__file__).resolve().parents[2] / "docs" / "wire-format.md"
E = WireErrorCode


def options(**values: object) -> OptionsMap:
    return OptionsMap.from_dict({"ProbeA": values})  # type: ignore[dict-item]


def raw(
    action: int, *backends: BackendOptions, program: str = "", delegates: tuple[str, ...] = ()
) -> Request:
    return Request(action, OptionsMap.unchecked(backends), program, delegates)  # type: ignore[arg-type]


def one(key: str, value: object) -> BackendOptions:
    return BackendOptions("ProbeA", (Option(key, value),))  # type: ignore[arg-type]


def error_of(action: object) -> WireError:
    with pytest.raises(WireError) as info:
        action()  # type: ignore[operator]
    return info.value


LOAD = Request.load("/data/local/tmp/p.pte", ("ProbeA",), options(threads=4, fast=True, mode="é"))


# ------------------------------------------------------------------------ frame and header


def test_crc_is_crc32_iso_hdlc_over_everything_before_it() -> None:
    assert zlib.crc32(b"123456789") == 0xCBF43926
    data = encode_request(LOAD)
    assert struct.unpack("<I", data[-4:])[0] == zlib.crc32(data[:-4])


def test_header_layout() -> None:
    data = encode_request(Request(Action.HELLO, seq=0x01020304))
    assert data[:16] == b"ETBO" + bytes([2, 1, 0, 0, 25, 0, 0, 0, 4, 3, 2, 1])
    assert encode_report(Report(Action.HELLO, Outcome.OK))[5] == 2


@pytest.mark.parametrize("version", [1, 3])
def test_another_version_is_refused_naming_both_versions(version: int) -> None:
    """A version-1 message is never read by version-2 rules, however alike its bytes."""
    data = bytearray(encode_request(Request(Action.HELLO)))
    data[4] = version
    error = error_of(lambda: decode_request(seal(bytes(data[:-4]))))
    assert isinstance(error, WireVersionError) and (error.code, error.found) == (E.VERSION, version)
    assert f"version {version}; this codec speaks wire-format version 2 only" in str(error)


def test_peek_header_reads_the_first_16_bytes_only() -> None:
    data = encode_request(Request(Action.RESET, seq=9))
    assert peek_header(data[:16]) == Header(MessageType.REQUEST, len(data), 9)
    assert peek_header(data + b"junk") == Header(MessageType.REQUEST, len(data), 9)
    assert peek_header(data, expect=MessageType.REQUEST).type is MessageType.REQUEST


def test_peek_header_errors() -> None:
    data = encode_request(LOAD)
    short = error_of(lambda: peek_header(data[:15]))
    assert (short.code, short.offset) == (E.TRUNCATED, 15)
    small = error_of(lambda: peek_header(data, max_message=len(data) - 1))
    assert (small.code, small.offset) == (E.LENGTH, 8)
    assert f"21..{len(data) - 1}" in str(small)
    assert peek_header(data, max_message=len(data)).length == len(data)
    wrong = error_of(lambda: peek_header(data, expect=MessageType.REPORT))
    assert (wrong.code, wrong.offset) == (E.MSG_TYPE, 5)
    assert "a request where a report was expected" in str(wrong)
    for bad in (20, MAX_MESSAGE + 1):
        with pytest.raises(ValueError, match="max_message"):
            peek_header(data, max_message=bad)


@pytest.mark.parametrize(
    ("tamper", "code", "offset"),
    [
        (lambda d: b"ETBX" + d[4:], E.BAD_MAGIC, 0),
        (lambda d: d[:4] + b"\x01" + d[5:], E.VERSION, 4),
        (lambda d: d[:5] + b"\x03" + d[6:], E.MSG_TYPE, 5),
        (lambda d: d[:6] + b"\x01\x00" + d[8:], E.FLAGS, 6),
        (lambda d: d[:8] + struct.pack("<I", 20) + d[12:], E.LENGTH, 8),
        (lambda d: d[:-1], E.TRUNCATED, None),
        (lambda d: d + b"\0", E.TRAILING, None),
        (lambda d: d[:-4] + bytes(4), E.CRC, None),
    ],
)
def test_frame_errors_name_code_and_offset(
    tamper: Callable[[bytes], bytes], code: WireErrorCode, offset: int | None
) -> None:
    data = encode_request(LOAD)
    error = error_of(lambda: decode_request(tamper(data)))
    expected_offset = {E.TRUNCATED: len(data) - 1, E.TRAILING: len(data), E.CRC: len(data) - 4}
    assert error.code is code
    assert error.offset == (offset if offset is not None else expected_offset[code])
    assert str(error).startswith(f"{code.name} at byte {error.offset}: ")


def test_body_errors_point_at_the_bad_bytes() -> None:
    data = encode_request(raw(Action.SET, one("k" * 64, 1)))
    key_at = data.index(b"k" * 64) - 2
    error = error_of(lambda: decode_request(data))
    assert (error.code, error.offset) == (E.KEY_LENGTH, key_at)
    assert "key is 64 bytes, limit 1..63 bytes" in str(error)

    data = encode_request(raw(Action.SET, one("key", "ab\0")))
    error = error_of(lambda: decode_request(data))
    assert (error.code, error.offset) == (E.NUL, data.index(b"ab\0") + 2)
    assert "'key'" in str(error)

    data = seal(
        encode_request(raw(Action.SET, one("key", "abc")))[:-4].replace(b"abc", b"a\xc0\xaf")
    )
    error = error_of(lambda: decode_request(data))
    assert (error.code, error.offset) == (E.UTF8, data.index(b"\xc0"))

    data = seal(encode_request(Request(Action.HELLO))[:-4] + b"\0\0")
    error = error_of(lambda: decode_request(data))
    assert (error.code, error.offset) == (E.TRAILING, len(data) - 6)
    assert "2 bytes between the last field and the CRC" in str(error)


def test_unexpected_field_message_says_the_field_must_be_empty() -> None:
    error = error_of(lambda: decode_request(encode_request(raw(Action.EXECUTE, program="/p"))))
    assert error.code is E.UNEXPECTED_FIELD
    assert "EXECUTE program must be empty here; it has 2 bytes" in str(error)


def test_seal_sets_length_and_crc_of_a_tampered_frame() -> None:
    data = encode_request(raw(Action.SET, one("flag", True)))
    tampered = seal(data[:-4].replace(b"flag\x01\x01", b"flag\x01\x02") + b"")
    assert struct.unpack_from("<I", tampered, 8)[0] == len(tampered) == len(data)
    assert error_of(lambda: decode_request(tampered)).code is E.BOOL
    longer = seal(data[:-4] + b"\0")
    assert len(longer) == len(data) + 1
    assert error_of(lambda: decode_request(longer)).code is E.TRAILING
    with pytest.raises(ValueError, match="length field"):
        seal(b"ETBO\x01\x01")


# ------------------------------------------------------------------------ types


def test_bools_and_ints_keep_their_types_across_the_wire() -> None:
    req = Request(Action.SET, options(t=True, one=1, f=False, zero=0))
    data = encode_request(req)
    assert b"\x01\x00t\x01\x01" in data and b"\x03\x00one\x02" + struct.pack("<q", 1) in data
    decoded = decode_request(data).options.backends[0].options
    assert [(o.key, type(o.value)) for o in decoded] == [
        ("t", bool),
        ("one", int),
        ("f", bool),
        ("zero", int),
    ]


def test_decoded_requests_carry_unchecked_maps_that_equal_the_original() -> None:
    decoded = decode_request(encode_request(LOAD))
    assert decoded == LOAD
    assert decoded.options.checked is False


def test_set_with_16_backends_decodes_although_optionsmap_validation_allows_8() -> None:
    ids = [f"Probe{i}" for i in range(16)]
    req = Request(Action.SET, OptionsMap.unchecked(BackendOptions(i) for i in ids))
    assert decode_request(encode_request(req)).options.backend_ids == tuple(ids)


# ------------------------------------------------------------------------ checked encoding


@pytest.mark.parametrize(
    ("req", "code"),
    [
        (Request(Action.NONE), E.ACTION),
        (Request(Action.LOAD, program="/" + "p" * 1024), E.TEXT_LENGTH),
        (Request(Action.LOAD, program="/p\0"), E.NUL),
        (Request(Action.LOAD, program="/p\udc80"), E.UTF8),
        (Request(Action.EXECUTE, program="/p"), E.UNEXPECTED_FIELD),
        (Request(Action.SET, delegates=("ProbeA",)), E.UNEXPECTED_FIELD),
        (Request(Action.HELLO, options(k=1)), E.UNEXPECTED_FIELD),
        (Request(Action.REGISTER, options(k=1)), E.UNEXPECTED_FIELD),
        (Request(Action.LOAD, delegates=tuple("ABCDEFGHI")), E.TOO_MANY_DELEGATES),
        (Request(Action.LOAD, delegates=("",)), E.ID_LENGTH),
        (Request(Action.LOAD, delegates=("D" * 64,)), E.ID_LENGTH),
    ],
)
def test_checked_requests_enforce_what_the_map_does_not(req: Request, code: WireErrorCode) -> None:
    assert req.options.checked
    assert error_of(lambda: encode_request(req)).code is code


def entry(name: str = "ProbeA", *opts: Option, flags: int = 1) -> ReportEntry:
    return ReportEntry(name, 0, 1, 0, flags, opts)


@pytest.mark.parametrize(
    ("rep", "code"),
    [
        (Report(11, Outcome.OK), E.ACTION),  # type: ignore[arg-type]
        (Report(Action.LOAD, 4), E.OUTCOME),  # type: ignore[arg-type]
        (Report(Action.LOAD, Outcome.OK, message="m" * 1025), E.TEXT_LENGTH),
        (Report(Action.LOAD, Outcome.OK, facts=(Option("f", 1),) * 33), E.TOO_MANY_OPTIONS),
        (Report(Action.LOAD, Outcome.OK, entries=(entry(),) * 17), E.TOO_MANY_BACKENDS),
        (Report(Action.LOAD, Outcome.OK, entries=(entry(flags=2),)), E.FLAGS),
        (Report(Action.LOAD, Outcome.OK, entries=(entry(""),)), E.ID_LENGTH),
        (
            Report(Action.LOAD, Outcome.OK, entries=(entry("A", *(Option("k", 1),) * 65),)),
            E.TOO_MANY_OPTIONS,
        ),
        (
            Report(Action.LOAD, Outcome.OK, entries=(entry("A", Option("n", INT32_MAX + 1)),)),
            E.INT_RANGE,
        ),
        (Report(Action.LOAD, Outcome.OK, facts=(Option("k" * 64, 1),)), E.KEY_LENGTH),
        (Report(Action.LOAD, Outcome.OK, facts=(Option("s", "v" * 256),)), E.STRING_LENGTH),
        (Report(Action.LOAD, Outcome.OK, facts=(Option("a\0", 1),)), E.NUL),
    ],
)
def test_checked_reports_enforce_every_limit(rep: Report, code: WireErrorCode) -> None:
    assert error_of(lambda: encode_report(rep)).code is code
    data = encode_report(rep, checked=False)
    assert error_of(lambda: decode_report(data)).code is code


def test_reports_keep_duplicates() -> None:
    rep = Report(
        Action.LOAD,
        Outcome.OK,
        facts=(Option("k", 1), Option("k", 2)),
        entries=(entry("A", Option("x", 1), Option("x", True)), entry("A")),
    )
    assert decode_report(encode_report(rep)) == rep


# ------------------------------------------------------------------------ unchecked encoding


@pytest.mark.parametrize(
    ("req", "code"),
    [
        (raw(Action.SET, one("k" * 64, 1)), E.KEY_LENGTH),
        (raw(Action.SET, one("n", INT32_MIN - 1)), E.INT_RANGE),
        (raw(Action.SET, one("s", "v" * 256)), E.STRING_LENGTH),
        (raw(Action.SET, one("k", 1), one("k", 2)), E.DUPLICATE_BACKEND),
        (raw(Action.SET, BackendOptions("A", (Option("k", 1), Option("k", 1)))), E.DUPLICATE_KEY),
        (raw(Action.SET, one("bad\ud800", 1)), E.UTF8),
        (raw(9), E.ACTION),
        (raw(Action.EXECUTE, program="/p"), E.UNEXPECTED_FIELD),
    ],
)
def test_unchecked_requests_go_out_as_given(req: Request, code: WireErrorCode) -> None:
    data = encode_request(req)
    assert error_of(lambda: decode_request(data)).code is code


def test_unchecked_lone_surrogates_are_sent_as_their_utf8_bytes() -> None:
    assert b"bad\xed\xa0\x80" in encode_request(raw(Action.SET, one("bad\ud800", 1)))


@pytest.mark.parametrize(
    ("req", "code"),
    [
        (raw(Action.SET, one("k" * 65536, 1)), E.KEY_LENGTH),
        (raw(Action.SET, one("n", 2**63)), E.INT_RANGE),
        (raw(Action.SET, BackendOptions("A", (Option("k", 1),) * 256)), E.TOO_MANY_OPTIONS),
        (raw(Action.LOAD, delegates=("D",) * 256), E.TOO_MANY_DELEGATES),
        (raw(256), E.ACTION),
    ],
)
def test_unchecked_encoding_refuses_what_the_wire_cannot_represent(
    req: Request, code: WireErrorCode
) -> None:
    assert error_of(lambda: encode_request(req)).code is code


def test_values_without_a_wire_form_are_type_or_value_errors() -> None:
    with pytest.raises(TypeError, match="float"):
        encode_request(raw(Action.SET, one("f", 1.5)))
    with pytest.raises(ValueError, match=r"seq must be 0\.\.4294967295"):
        encode_request(Request(Action.HELLO, seq=-1))
    with pytest.raises(TypeError, match="seq must be an int"):
        encode_request(Request(Action.HELLO, seq=True))
    with pytest.raises(ValueError, match="calls"):
        encode_report(Report(Action.LOAD, Outcome.OK, entries=(ReportEntry("A", 0, 65536),)))
    with pytest.raises(TypeError, match="key must be a str"):
        encode_request(raw(Action.SET, one(5, 1)))  # type: ignore[arg-type]


# ------------------------------------------------------------------------ readable form


def spec_examples() -> list[dict[str, object]]:
    blocks = re.findall(r"```json\n(.*?)```", SPEC.read_text(encoding="utf-8"), re.DOTALL)
    return [json.loads(b) for b in blocks]


def test_spec_examples_round_trip_exactly() -> None:
    examples = spec_examples()
    assert [e["type"] for e in examples] == ["request", "report"]
    for example in examples:
        msg = from_readable(example)
        assert isinstance(msg, Request | Report), msg
        data = encode_request(msg) if isinstance(msg, Request) else encode_report(msg)
        decoded = decode_request(data) if isinstance(msg, Request) else decode_report(data)
        assert list(to_readable(decoded)) == list(example)
        assert json.dumps(to_readable(decoded)) == json.dumps(example)


def test_readable_names() -> None:
    rep = to_readable(Report(Action.NONE, Outcome.RUNTIME_ERROR, detail=E.KEY_LENGTH))
    assert (rep["action"], rep["outcome"], rep["detail"]) == ("none", "runtime_error", 13)
    assert type(rep["detail"]) is int
    assert to_readable(Request(Action.REGISTER))["action"] == "register"


def test_from_readable_requests_carry_unchecked_maps_and_encode_16_backends() -> None:
    readable = {
        "type": "request",
        "seq": 1,
        "action": "register",
        "program": "",
        "delegates": [],
        "backends": [{"id": f"P{i}", "options": []} for i in range(16)],
    }
    req = from_readable(readable)
    assert isinstance(req, Request) and req.options.checked is False
    assert to_readable(decode_request(encode_request(req))) == readable


def readable_load(**changes: object) -> dict[str, object]:
    base: dict[str, object] = to_readable(LOAD)
    return base | changes


@pytest.mark.parametrize(
    ("readable", "message"),
    [
        ([], 'expected "request" or "report"'),
        ({"type": "frame"}, 'expected "request" or "report", got \'frame\''),
        ({"type": "request"}, "request: missing ['seq'"),
        (readable_load(extra=1), "unknown ['extra']"),
        (readable_load(seq="1"), "seq: expected an integer, got str '1'"),
        (readable_load(seq=True), "seq: expected an integer, got bool"),
        (readable_load(action="LOAD"), "action: 'LOAD' is not one of"),
        (readable_load(delegates="ProbeA"), "delegates: expected a list"),
        (readable_load(delegates=[1]), "delegates[0]: expected a string"),
        (readable_load(backends=[{"id": "A"}]), "backends[0]: missing ['options']"),
        (
            readable_load(
                backends=[{"id": "A", "options": [{"key": "k", "type": "int", "value": True}]}]
            ),
            "backends[0].options[0].value: expected a int as the type says, got bool True",
        ),
        (
            readable_load(
                backends=[{"id": "A", "options": [{"key": "k", "type": "bool", "value": 1}]}]
            ),
            "backends[0].options[0].value: expected a bool as the type says, got int 1",
        ),
        (
            readable_load(
                backends=[{"id": "A", "options": [{"key": "k", "type": "float", "value": 1.5}]}]
            ),
            "backends[0].options[0].type: 'float' is not one of",
        ),
        (
            {
                "type": "report",
                "seq": 1,
                "action": "load",
                "outcome": "fine",
                "detail": 0,
                "message": "",
                "facts": [],
                "entries": [],
            },
            "outcome: 'fine' is not one of",
        ),
        (
            {
                "type": "report",
                "seq": 1,
                "action": "load",
                "outcome": "ok",
                "detail": 0,
                "message": "",
                "facts": [],
                "entries": [{"name": "A"}],
            },
            "entries[0]: missing",
        ),
    ],
)
def test_from_readable_names_the_bad_field(readable: object, message: str) -> None:
    with pytest.raises(ReadableFormError) as info:
        from_readable(readable)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_from_readable_enforces_wire_limits() -> None:
    too_long = readable_load(
        backends=[{"id": "A", "options": [{"key": "k" * 64, "type": "int", "value": 1}]}]
    )
    assert error_of(lambda: from_readable(too_long)).code is E.KEY_LENGTH
    beyond = readable_load(
        backends=[{"id": "A", "options": [{"key": "k", "type": "int", "value": 2**31}]}]
    )
    assert error_of(lambda: from_readable(beyond)).code is E.INT_RANGE
    execute = to_readable(Request(Action.EXECUTE)) | {"program": "/p"}
    assert error_of(lambda: from_readable(execute)).code is E.UNEXPECTED_FIELD
