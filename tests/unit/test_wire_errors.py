"""Every refusal of the Python codec names its code, the byte offset and the field, whole:
the decoder's for each field a message can be cut short in (in the specification's
order), for each header and body rule; the encoder's for each field given a value of
the wrong type or past the wire's reach. tests/unit/test_wire.py checks codes and offsets of
some; this pins the message a user reads, so a refusal naming the wrong field fails."""

from __future__ import annotations

import dataclasses
import re
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from harness.codec import wire
from harness.codec.wire import HEADER_SIZE, WireError, WireErrorCode
from harness.data.messages import (
    Action,
    LoadPath,
    LoadSpec,
    Outcome,
    Report,
    ReportEntry,
    Request,
)
from harness.data.options import BackendOptions, Option, OptionsMap

E = WireErrorCode
BOTH = OptionsMap.from_dict({"P": {"m": "x"}})
LOAD = Request.load(
    "a.pte",
    ("P",),
    OptionsMap.from_dict({"P": {"b": True, "i": -5, "s": "é"}}),
    path=LoadPath.MODULE_BOTH,
    method_options=BOTH,
    method="fwd",
    keep=True,
    models=(
        LoadSpec(
            "b.pte", ("P",), OptionsMap.from_dict({"P": {"i": 2}}), LoadPath.MODULE_BOTH, "m2", BOTH
        ),
    ),
)
ENTRY = ReportEntry("P", 0, 1, 2, 1, (Option("b", False),), 1)
REPORT = Report(Action.LOAD, Outcome.OK, 0x10, "hi", (Option("load_path", "program"),), (ENTRY,), 9)


def refusal(action: Callable[[], object]) -> WireError:
    with pytest.raises(WireError) as raised:
        action()
    return raised.value


def whole(error: WireError) -> tuple[WireErrorCode, int, str]:
    assert str(error) == f"{error.code.name} at byte {error.offset}: {error.problem}"
    return error.code, error.offset, error.problem


def options(**values: Any) -> OptionsMap:
    """An unchecked map of backend ``P`` holding ``values`` as given, of any type."""
    return OptionsMap.unchecked(
        [BackendOptions("P", tuple(Option(k, v) for k, v in values.items()))]
    )


# ---- the decoder: cut short in each field ---------------------------------------------------


def cut_fields(message: bytes, decode: Callable[[bytes], object]) -> list[str]:
    """The field each cut of ``message`` (sealed anew) is refused in, in order; every
    refusal is TRUNCATED at the field's start and counts the bytes left exactly."""
    body = message[:-4]
    names: list[str] = []
    for cut in range(HEADER_SIZE + 1, len(body)):
        error = refusal(lambda: decode(wire.seal(body[:cut])))  # noqa: B023
        found = re.fullmatch(
            r"(.+) needs (\d+) bytes, (\d+) are left before the CRC", error.problem
        )
        assert error.code is E.TRUNCATED and found, (cut, error)
        assert int(found[3]) == cut - error.offset < int(found[2]), (cut, error)
        if not names or names[-1] != found[1]:
            names.append(found[1])
    return names


def option_fields(key: str, kind: str) -> list[str]:
    value = [f"string value of {key!r} length"] if kind == "string" else []
    return ["key length", "key", f"type tag of {key!r}", *value, f"{kind} value of {key!r}"]


def test_a_load_cut_short_is_refused_in_each_field_by_name() -> None:
    flags = "flags (bits 0 KEEP, 1 CONCURRENT; a further model: none)"

    def spec(what: str, options: list[str]) -> list[str]:
        return [
            f"{what} program length",
            f"{what} program",
            f"{what} delegate count",
            "delegate id length",
            "delegate id",
            f"{what} backend count",
            "backend id length",
            "backend id",
            f"{what} option count of 'P'",
            *options,
            f"{what} path",
            f"{what} {flags}",
            f"{what} method name length",
            f"{what} method name",
            f"{what} module_both method map backend count",
            "backend id length",
            "backend id",
            f"{what} module_both method map option count of 'P'",
            *option_fields("m", "string"),
        ]

    load = option_fields("b", "bool") + option_fields("i", "int") + option_fields("s", "string")
    model = spec("LOAD model 1", option_fields("i", "int"))
    expected = spec("LOAD", load)
    expected.insert(expected.index("LOAD path") + 20, "LOAD further model count")
    assert cut_fields(wire.encode_request(LOAD), wire.decode_request) == expected + model


def test_a_report_cut_short_is_refused_in_each_field_by_name() -> None:
    assert cut_fields(wire.encode_report(REPORT), wire.decode_report) == [
        "outcome",
        "detail",
        "message length",
        "message",
        "fact count",
        *option_fields("load_path", "string"),
        "entry count",
        "entry name length",
        "entry name",
        "status of 'P'",
        "calls of 'P'",
        "executes of 'P'",
        "flags of 'P' (only bit 0, PROBE, is defined)",
        "model of 'P'",
        "option count of 'P'",
        *option_fields("b", "bool"),
    ]


# ---- the decoder: header and frame rules --------------------------------------------------

FRAME = wire.encode_request(Request(Action.HELLO))
N = len(FRAME)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (FRAME[:15], (E.TRUNCATED, 15, "15 bytes, fewer than the 16-byte header")),
        (b"ETBX" + FRAME[4:], (E.BAD_MAGIC, 0, "magic is b'ETBX', not b'ETBO'")),
        (
            FRAME[:5] + b"\x03" + FRAME[6:],
            (E.MSG_TYPE, 5, "type 3 is neither request (1) nor report (2)"),
        ),
        (FRAME[:5] + b"\x02" + FRAME[6:], (E.MSG_TYPE, 5, "a report where a request was expected")),
        (
            FRAME[:6] + b"\x01\x00" + FRAME[8:],
            (E.FLAGS, 6, "reserved header flags are 0x0001, not 0"),
        ),
        (
            FRAME[:8] + struct.pack("<I", 20) + FRAME[12:],
            (E.LENGTH, 8, "length field is 20, allowed 21..1048576"),
        ),
        (FRAME[:-1], (E.TRUNCATED, N - 1, f"buffer has {N - 1} bytes, the length field says {N}")),
        (
            FRAME + b"abc",
            (E.TRAILING, N, f"buffer has {N + 3} bytes, 3 more than the length field's {N}"),
        ),
        (
            FRAME[:-4] + bytes(4),
            (
                E.CRC,
                N - 4,
                f"CRC field is 0x00000000, the bytes give 0x{zlib.crc32(FRAME[:-4]):08x}",
            ),
        ),
        (
            wire.seal(FRAME[:-4] + b"\0\0"),
            (E.TRAILING, N - 4, "2 bytes between the last field and the CRC"),
        ),
    ],
)
def test_each_frame_rule_refuses_with_its_whole_message(data: bytes, expected: tuple) -> None:
    assert whole(refusal(lambda: wire.decode_request(data))) == expected


def test_a_version_refusal_names_the_version_found() -> None:
    version = wire.WIRE_VERSION + 7
    error = refusal(lambda: wire.decode_request(FRAME[:4] + bytes([version]) + FRAME[5:]))
    assert (error.code, error.offset) == (E.VERSION, 4)
    assert error.problem.startswith(f"version {version}; ")


def test_the_smallest_limit_a_reader_may_set_is_the_smallest_message() -> None:
    short = FRAME[:8] + struct.pack("<I", wire.MIN_MESSAGE) + FRAME[12:16]
    assert wire.peek_header(short, wire.MIN_MESSAGE).length == wire.MIN_MESSAGE
    with pytest.raises(ValueError, match=r"^max_message must be 21\.\.1048576; got 20$"):
        wire.peek_header(short, wire.MIN_MESSAGE - 1)


# ---- the decoder: body rules --------------------------------------------------------------


def body_refusal(request: Request, old: bytes, new: bytes) -> tuple[WireErrorCode, int, str]:
    """Refusal of ``request`` encoded, with the first ``old`` bytes of its body made ``new``."""
    body = wire.encode_request(request)[:-4]
    at = body.index(old, HEADER_SIZE)
    tampered = wire.seal(body[:at] + new + body[at + len(old) :])
    return whole(refusal(lambda: wire.decode_request(tampered)))


def set_request(**values: object) -> Request:
    return Request(Action.SET, options(**values))


def test_each_body_rule_refuses_with_its_whole_message() -> None:
    body = wire.encode_request(set_request(k=1, j=2))[:-4]
    second = body.index(b"\x01\x00j")
    assert body_refusal(set_request(k=1, j=2), b"\x01\x00j", b"\x01\x00k") == (
        E.DUPLICATE_KEY,
        second,
        "key 'k' appears twice in one backend",
    )
    value = wire.encode_request(set_request(b=True))[:-4].index(b"b\x01\x01") + 2
    assert body_refusal(set_request(b=True), b"b\x01\x01", b"b\x01\x02") == (
        E.BOOL,
        value,
        "bool 'b' is byte 2, not 0 or 1",
    )
    int_at = wire.encode_request(set_request(i=7))[:-4].index(b"i\x02") + 2
    too_big = b"i\x02" + struct.pack("<q", 2**31)
    assert body_refusal(set_request(i=7), b"i\x02" + struct.pack("<q", 7), too_big) == (
        E.INT_RANGE,
        int_at,
        "int 'i' is 2147483648, outside int32 (-2147483648..2147483647)",
    )
    too_small = b"i\x02" + struct.pack("<q", -(2**31) - 1)
    assert body_refusal(set_request(i=7), b"i\x02" + struct.pack("<q", 7), too_small)[2] == (
        "int 'i' is -2147483649, outside int32 (-2147483648..2147483647)"
    )
    assert body_refusal(set_request(t=1), b"t\x02", b"t\x04") == (
        E.TAG,
        int_at - 1,
        "type tag 4 of 't' is not 1, 2 or 3",
    )
    nul_at = wire.encode_request(set_request(s="abcd"))[:-4].index(b"abcd")
    assert body_refusal(set_request(s="abcd"), b"abcd", b"a\0c\0") == (
        E.NUL,
        nul_at + 1,
        "string value of 's' has a NUL byte at index 1; the runtime's C strings would end there",
    )
    assert body_refusal(set_request(s="abcd"), b"abcd", b"ab\xc0\xaf") == (
        E.UTF8,
        nul_at + 2,
        "string value of 's' is not valid UTF-8 at index 2 (invalid start byte): b'\\xc0'",
    )


def test_a_backend_twice_and_a_field_that_must_be_empty_name_their_place() -> None:
    two = Request(
        Action.SET, OptionsMap.unchecked([BackendOptions("P", ()), BackendOptions("Q", ())])
    )
    second = wire.encode_request(two)[:-4].index(b"\x01\x00Q")
    assert body_refusal(two, b"\x01\x00Q", b"\x01\x00P") == (
        E.DUPLICATE_BACKEND,
        second,
        "backend 'P' appears twice",
    )
    execute = Request(Action.EXECUTE, program="/p")
    assert whole(refusal(lambda: wire.decode_request(wire.encode_request(execute)))) == (
        E.UNEXPECTED_FIELD,
        HEADER_SIZE + 1,
        "EXECUTE program must be empty here; it has 2 bytes",
    )
    assert whole(
        refusal(
            lambda: wire.decode_request(
                wire.encode_request(dataclasses.replace(execute, program="", delegates=("P",)))
            )
        )
    ) == (
        E.UNEXPECTED_FIELD,
        HEADER_SIZE + 3,
        "EXECUTE delegate count must be empty here; it has 1",
    )


def test_an_action_out_of_range_is_refused_by_name() -> None:
    unknown = wire.seal(FRAME[:HEADER_SIZE] + b"\0" + FRAME[HEADER_SIZE + 1 : -4])
    code, offset, problem = whole(refusal(lambda: wire.decode_request(unknown)))
    assert (code, offset) == (E.ACTION, HEADER_SIZE)
    assert re.fullmatch(r"action is 0, limit 1\.\.\d+", problem), problem
    report = wire.encode_report(Report(Action.NONE, Outcome.OK))[:-4]
    bad_outcome = wire.seal(report[: HEADER_SIZE + 1] + b"\x63" + report[HEADER_SIZE + 2 :])
    code, offset, problem = whole(refusal(lambda: wire.decode_report(bad_outcome)))
    assert (code, offset) == (E.OUTCOME, HEADER_SIZE + 1)
    assert re.fullmatch(r"outcome is 99, limit 0\.\.\d+", problem), problem


def test_models_are_numbered_from_1() -> None:
    decoded = wire.decode_request(wire.encode_request(LOAD))
    assert decoded == dataclasses.replace(LOAD, options=decoded.options)
    bad = dataclasses.replace(
        LOAD,
        models=(dataclasses.replace(LOAD.models[0], delegates=tuple(f"D{i}" for i in range(9))),),
    )
    error = refusal(
        lambda: wire.decode_request(
            wire.encode_request(
                dataclasses.replace(bad, options=OptionsMap.unchecked(bad.options.backends))
            )
        )
    )
    assert error.problem == "LOAD model 1 delegate count is 9, limit 0..8"


# ---- the encoder --------------------------------------------------------------------------


def type_error(action: Callable[[], object]) -> str:
    with pytest.raises(TypeError) as raised:
        action()
    return str(raised.value)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("action", "load", "action must be an int; got str 'load'"),
        ("outcome", 1.5, "outcome must be an int; got float 1.5"),
        ("detail", 1.5, "detail must be an int; got float 1.5"),
        ("message", 5, "message must be a str; got int 5"),
        ("seq", True, "seq must be an int; got bool True"),
    ],
)
def test_report_fields_of_the_wrong_type_are_named(field: str, value: Any, message: str) -> None:
    broken = dataclasses.replace(REPORT, **{field: value})
    assert type_error(lambda: wire.encode_report(broken)) == message


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", 5, "entry name must be a str; got int 5"),
        ("status", 1.5, "status of 'P' must be an int; got float 1.5"),
        ("calls", None, "calls of 'P' must be an int; got NoneType None"),
        ("executes", "2", "executes of 'P' must be an int; got str '2'"),
        (
            "flags",
            1.5,
            "flags of 'P' (only bit 0, PROBE, is defined) must be an int; got float 1.5",
        ),
        ("model", False, "model of 'P' must be an int; got bool False"),
    ],
)
def test_entry_fields_of_the_wrong_type_are_named(field: str, value: Any, message: str) -> None:
    broken = dataclasses.replace(REPORT, entries=(dataclasses.replace(ENTRY, **{field: value}),))
    assert type_error(lambda: wire.encode_report(broken)) == message


def test_report_limits_name_their_field_and_place() -> None:
    many = dataclasses.replace(REPORT, facts=tuple(Option(f"f{i}", i) for i in range(33)))
    at = HEADER_SIZE + 6 + 2 + 2
    assert whole(refusal(lambda: wire.encode_report(many))) == (
        E.TOO_MANY_OPTIONS,
        at,
        "fact count is 33, limit 0..32",
    )
    entries = dataclasses.replace(REPORT, facts=(), entries=(ENTRY,) * 17)
    assert whole(refusal(lambda: wire.encode_report(entries)))[1:] == (
        at + 1,
        "entry count is 17, limit 0..16",
    )
    value: Any  # of the field's own type, which differs from field to field
    for field, value, problem in [
        ("flags", 2, "flags of 'P' (only bit 0, PROBE, is defined) is 2, limit 0..1"),
        ("model", 9, "model of 'P' is 9, limit 0..7"),
        ("options", (Option("o", 1),) * 65, "option count of 'P' is 65, limit 0..64"),
    ]:
        broken = dataclasses.replace(
            REPORT, entries=(dataclasses.replace(ENTRY, **{field: value}),)
        )
        assert whole(refusal(lambda: wire.encode_report(broken)))[2] == problem  # noqa: B023
    unchecked = dataclasses.replace(REPORT, entries=(dataclasses.replace(ENTRY, flags=256),))
    assert whole(refusal(lambda: wire.encode_report(unchecked, checked=False))) == (
        E.FLAGS,
        wire.encode_report(REPORT).rindex(b"\x01\x00P") + 3 + 8,
        "flags of 'P' (only bit 0, PROBE, is defined) is 256; a u8 holds 0..255",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"program": 5}, "LOAD program must be a str; got int 5"),
        ({"delegates": ("P", 5)}, "delegate id must be a str; got int 5"),
        ({"path": "both"}, "LOAD path must be an int; got str 'both'"),
        ({"method": None}, "LOAD method name must be a str; got NoneType None"),
        (
            {"options": OptionsMap.unchecked([BackendOptions(5, ())])},  # type: ignore[arg-type]
            "backend id must be a str; got int 5",
        ),
    ],
)
def test_request_fields_of_the_wrong_type_are_named(change: dict, message: str) -> None:
    broken = dataclasses.replace(LOAD, **change)
    assert type_error(lambda: wire.encode_request(broken)) == message


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"program": 5}, "LOAD model 1 program must be a str; got int 5"),
        ({"delegates": (5,)}, "delegate id must be a str; got int 5"),
        ({"path": 1.5}, "LOAD model 1 path must be an int; got float 1.5"),
        ({"method": 0}, "LOAD model 1 method name must be a str; got int 0"),
    ],
)
def test_model_fields_of_the_wrong_type_are_named(change: dict, message: str) -> None:
    broken = dataclasses.replace(LOAD, models=(dataclasses.replace(LOAD.models[0], **change),))
    assert type_error(lambda: wire.encode_request(broken)) == message


def test_request_limits_name_their_field_and_place() -> None:
    checked = Request.load("p", tuple(f"D{i}" for i in range(9)), OptionsMap())
    assert whole(refusal(lambda: wire.encode_request(checked))) == (
        E.TOO_MANY_DELEGATES,
        HEADER_SIZE + 4,
        "LOAD delegate count is 9, limit 0..8",
    )
    stray = Request.load("p", (), OptionsMap(), method_options=BOTH)
    assert whole(refusal(lambda: wire.check_request(stray)))[2] == (
        "LOAD program method map backend count must be empty here; it has 1"
    )
    models = dataclasses.replace(stray, method_options=OptionsMap(), models=LOAD.models * 8)
    assert whole(refusal(lambda: wire.check_request(models)))[2] == (
        "LOAD further model count is 8, limit 0..7"
    )
    model_map = dataclasses.replace(
        LOAD, models=(dataclasses.replace(LOAD.models[0], path=LoadPath.MODULE),)
    )
    assert whole(refusal(lambda: wire.check_request(model_map)))[2] == (
        "LOAD model 1 module method map backend count must be empty here; it has 1"
    )
    flags = dataclasses.replace(
        LOAD,
        options=OptionsMap.unchecked(
            [BackendOptions("P", tuple(Option(f"k{i}", i) for i in range(65)))]
        ),
    )
    assert whole(refusal(lambda: wire.check_request(flags)))[2] == (
        "LOAD option count of 'P' is 65, limit 0..64"
    )


def test_checked_requests_refuse_duplicates_even_in_unchecked_maps() -> None:
    twice = Request(
        Action.SET, OptionsMap.unchecked([BackendOptions("P", (Option("k", 1), Option("k", 2)))])
    )
    at = wire.encode_request(twice)[:-4].rindex(b"\x01\x00k")
    assert whole(refusal(lambda: wire.check_request(twice))) == (
        E.DUPLICATE_KEY,
        at,
        "key 'k' appears twice in one backend",
    )
    backends = Request(
        Action.SET, OptionsMap.unchecked([BackendOptions("P", ()), BackendOptions("P", ())])
    )
    at = wire.encode_request(backends)[:-4].rindex(b"\x01\x00P")
    assert whole(refusal(lambda: wire.check_request(backends))) == (
        E.DUPLICATE_BACKEND,
        at,
        "backend 'P' appears twice; merge its options",
    )
    model = dataclasses.replace(
        LOAD, models=(dataclasses.replace(LOAD.models[0], options=twice.options),)
    )
    assert whole(refusal(lambda: wire.check_request(model)))[0] is E.DUPLICATE_KEY


@pytest.mark.parametrize(
    ("value", "code"),
    [("a\0", E.NUL), ("\ud800", E.UTF8), ("x" * 256, E.STRING_LENGTH), (2**31, E.INT_RANGE)],
)
def test_checked_requests_refuse_bad_values_of_unchecked_maps(value: object, code: E) -> None:
    request = Request(Action.SET, options(k=value))
    assert refusal(lambda: wire.check_request(request)).code is code


@pytest.mark.parametrize(("key", "code"), [("a\0", E.NUL), ("\ud800", E.UTF8)])
def test_checked_requests_refuse_bad_keys_of_unchecked_maps(key: str, code: E) -> None:
    request = Request(Action.SET, options(**{key: 1}))
    assert refusal(lambda: wire.check_request(request)).code is code


def test_checked_requests_refuse_a_value_of_no_option_type() -> None:
    request = Request(Action.SET, options(k=1.5))
    with pytest.raises(TypeError):
        wire.check_request(request)


def test_unchecked_requests_reach_to_the_wire_and_no_further() -> None:
    assert wire.decode_request(
        wire.encode_request(Request(Action.SET, options(lo=-(2**31), hi=2**31 - 1)))
    ).options == options(lo=-(2**31), hi=2**31 - 1)
    wire.encode_request(Request(Action.SET, options(k=-(2**63))))
    low = refusal(lambda: wire.encode_request(Request(Action.SET, options(k=-(2**63) - 1))))
    assert (low.code, low.problem) == (
        E.INT_RANGE,
        f"int 'k' is {-(2**63) - 1}, outside {-(2**63)}..{2**63 - 1}",
    )
    assert low.offset == wire.encode_request(Request(Action.SET, options(k=0))).index(b"k\x02") + 2
    wire.encode_request(Request(Action.SET, options(s="x" * 0xFFFF)))
    long = refusal(lambda: wire.encode_request(Request(Action.SET, options(s="x" * 0x10000))))
    assert whole(long)[0] is E.STRING_LENGTH
    assert long.problem == "string value of 's' is 65536 bytes; a u16 holds 65535"
    at = wire.encode_request(Request(Action.SET, options(s="")))[:-4].index(b"s\x03") + 2
    assert long.offset == at


def test_an_unknown_action_or_path_goes_out_under_its_number() -> None:
    action = dataclasses.replace(Request(Action.SET, OptionsMap.unchecked([])), action=42)  # type: ignore[arg-type]
    assert wire.encode_request(action)[HEADER_SIZE] == 42
    assert type_error(lambda: wire.encode_request(dataclasses.replace(action, program=1))) == (  # type: ignore[arg-type]
        "42 program must be a str; got int 1"
    )
    path = dataclasses.replace(
        LOAD,
        options=OptionsMap.unchecked([]),
        path=9,  # type: ignore[arg-type]
        method_options=OptionsMap.unchecked([BackendOptions(f"B{i}", ()) for i in range(256)]),
    )
    assert whole(refusal(lambda: wire.encode_request(path)))[2] == (
        "LOAD 9 method map backend count is 256; a u8 holds 0..255"
    )
    small = dataclasses.replace(path, method_options=OptionsMap.unchecked([]))
    assert refusal(lambda: wire.decode_request(wire.encode_request(small))).code is E.LOAD_PATH


def test_seal_needs_the_length_field_and_no_more() -> None:
    assert len(wire.seal(bytes(12))) == 16
    with pytest.raises(ValueError, match=r"^11 bytes cannot hold the header's length field$"):
        wire.seal(bytes(11))


def test_an_unchecked_text_too_long_for_the_wire_names_its_place() -> None:
    report = dataclasses.replace(REPORT, message="m" * 0x10000)
    assert whole(refusal(lambda: wire.encode_report(report, checked=False))) == (
        E.TEXT_LENGTH,
        HEADER_SIZE + 6,
        "message is 65536 bytes; a u16 holds 65535",
    )


def test_an_action_out_of_range_is_refused_by_name_when_encoding() -> None:
    request = dataclasses.replace(Request(Action.HELLO), action=0)  # type: ignore[arg-type]
    problem = refusal(lambda: wire.encode_request(request)).problem
    assert re.fullmatch(r"action is 0, limit 1\.\.\d+", problem), problem
    report = dataclasses.replace(REPORT, action=99)  # type: ignore[arg-type]
    problem = refusal(lambda: wire.encode_report(report)).problem
    assert re.fullmatch(r"action is 99, limit 0\.\.\d+", problem), problem
    frame = wire.encode_report(REPORT)[:-4]
    bad = wire.seal(frame[:HEADER_SIZE] + b"\x63" + frame[HEADER_SIZE + 1 :])
    code, offset, problem = whole(refusal(lambda: wire.decode_report(bad)))
    assert (code, offset) == (E.ACTION, HEADER_SIZE)
    assert re.fullmatch(r"action is 99, limit 0\.\.\d+", problem), problem


def test_a_models_counts_are_named_when_encoding() -> None:
    model = LOAD.models[0]
    delegates = dataclasses.replace(model, delegates=tuple(f"D{i}" for i in range(9)))
    request = dataclasses.replace(LOAD, models=(delegates,))
    assert whole(refusal(lambda: wire.check_request(request)))[2] == (
        "LOAD model 1 delegate count is 9, limit 0..8"
    )
    backends = OptionsMap.unchecked([BackendOptions(f"B{i}", ()) for i in range(9)])
    request = dataclasses.replace(LOAD, models=(dataclasses.replace(model, options=backends),))
    assert whole(refusal(lambda: wire.check_request(request)))[2] == (
        "LOAD model 1 backend count is 9, limit 0..8"
    )


def test_a_bool_cut_before_its_value_is_truncated_whatever_the_crc_holds() -> None:
    """The CRC follows the body: a decoder that read the missing value byte from it would
    take a CRC starting with 0 or 1 for a bool."""
    for seq in range(2000):
        body = wire.encode_request(Request(Action.SET, options(b=True), seq=seq))[:-5]
        frame = wire.seal(body)
        if frame[-4] <= 1:
            break
    else:
        raise AssertionError("no seq gives a CRC starting with 0 or 1")
    assert whole(refusal(lambda: wire.decode_request(frame))) == (
        E.TRUNCATED,
        len(body),
        "bool value of 'b' needs 1 bytes, 0 are left before the CRC",
    )
