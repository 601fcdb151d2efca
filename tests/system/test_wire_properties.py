"""Properties of harness.codec.wire over random messages and random or mutated bytes."""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.codec.readable import from_readable, to_readable
from harness.codec.wire import (
    WireError,
    decode_report,
    decode_request,
    encode_report,
    encode_request,
    seal,
)
from harness.data.messages import Action, Outcome, Report, ReportEntry, Request
from harness.data.options import INT32_MAX, INT32_MIN, BackendOptions, Option, OptionsMap

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Any code point but surrogates (not UTF-8) and NUL (ends the runtime's C strings).
CHARS = st.characters(codec="utf-8", exclude_characters="\0")


def fitted(text: str, most: int) -> str:
    """``text`` cut to at most ``most`` bytes of UTF-8, on a character boundary."""
    while len(text.encode("utf-8")) > most:
        text = text[:-1]
    return text


def utf8_text(least: int, most: int, max_chars: int) -> st.SearchStrategy[str]:
    return (
        st.text(CHARS, min_size=least, max_size=max_chars)
        .map(lambda s: fitted(s, most))
        .filter(lambda s: len(s.encode("utf-8")) >= least)
    )


KEYS = utf8_text(1, 63, 63)
IDS = utf8_text(1, 63, 63)
VALUES = st.one_of(st.booleans(), st.integers(INT32_MIN, INT32_MAX), utf8_text(0, 255, 80))
OPTIONS = st.builds(Option, KEYS, VALUES)


def unique_options(most: int) -> st.SearchStrategy[tuple[Option, ...]]:
    return st.lists(OPTIONS, max_size=most, unique_by=lambda o: o.key).map(tuple)


def backends(
    most: int, options: st.SearchStrategy[tuple[Option, ...]]
) -> st.SearchStrategy[OptionsMap]:
    return st.lists(
        st.builds(BackendOptions, IDS, options), max_size=most, unique_by=lambda b: b.backend_id
    ).map(OptionsMap.unchecked)


SEQ = st.integers(0, 2**32 - 1)
LOAD_REQUESTS = st.builds(
    Request,
    st.just(Action.LOAD),
    backends(8, unique_options(12)),
    utf8_text(0, 1024, 300),
    st.lists(IDS, max_size=8).map(tuple),
    SEQ,
)
GLOBAL_REQUESTS = st.builds(
    Request, st.sampled_from([Action.SET, Action.GET]), backends(16, unique_options(8)), seq=SEQ
)
REGISTER_REQUESTS = st.builds(Request, st.just(Action.REGISTER), backends(16, st.just(())), seq=SEQ)
BARE_REQUESTS = st.builds(
    Request, st.sampled_from([Action.EXECUTE, Action.RESET, Action.HELLO]), seq=SEQ
)
REQUESTS = st.one_of(LOAD_REQUESTS, GLOBAL_REQUESTS, REGISTER_REQUESTS, BARE_REQUESTS)

ANY_OPTIONS = st.lists(OPTIONS, max_size=10).map(tuple)  # reports keep duplicates
ENTRIES = st.builds(
    ReportEntry,
    IDS,
    st.integers(0, 2**32 - 1),
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFF),
    st.sampled_from([0, 1]),
    ANY_OPTIONS,
)
REPORTS = st.builds(
    Report,
    st.sampled_from(list(Action)),
    st.sampled_from(list(Outcome)),
    st.integers(0, 2**32 - 1),
    utf8_text(0, 1024, 200),
    st.lists(OPTIONS, max_size=32).map(tuple),
    st.lists(ENTRIES, max_size=16).map(tuple),
    SEQ,
)
MESSAGES = st.one_of(REQUESTS, REPORTS)


def encode(msg: Request | Report) -> bytes:
    return encode_request(msg) if isinstance(msg, Request) else encode_report(msg)


def decode_as(data: bytes, msg: Request | Report) -> Request | Report:
    return decode_request(data) if isinstance(msg, Request) else decode_report(data)


def typed(msg: Request | Report) -> str:
    """The readable form as JSON text, in which ``true`` and ``1`` differ."""
    return json.dumps(to_readable(msg), ensure_ascii=False)


@FAST
@given(MESSAGES)
def test_valid_messages_round_trip_with_their_types(msg: Request | Report) -> None:
    data = encode(msg)
    decoded = decode_as(data, msg)
    assert decoded == msg
    assert typed(decoded) == typed(msg)
    assert encode(decoded) == data


@FAST
@given(MESSAGES)
def test_readable_form_round_trips_through_json(msg: Request | Report) -> None:
    text = typed(msg)
    again = from_readable(json.loads(text))
    assert isinstance(again, Request | Report), again
    assert typed(again) == text
    assert encode(again) == encode(msg)


def decode_only_wire_errors(data: bytes) -> None:
    """Each decoder either decodes ``data`` canonically or raises WireError, nothing else."""
    decoders: tuple[Callable[[bytes], Request | Report], ...] = (decode_request, decode_report)
    for decode in decoders:
        try:
            msg = decode(data)
        except WireError:
            continue
        assert encode(msg) == data


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_wire_errors(data: bytes) -> None:
    decode_only_wire_errors(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([b"ETBO\x02\x01\0\0", b"ETBO\x02\x02\0\0"]))
def test_random_bodies_behind_a_valid_header_raise_only_wire_errors(
    body: bytes, head: bytes
) -> None:
    decode_only_wire_errors(seal(head + b"\0\0\0\0\x01\0\0\0" + body))


MUTATIONS = st.sampled_from(["flip", "insert", "delete", "truncate", "replace"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    MESSAGES,
    st.lists(
        st.tuples(MUTATIONS, st.integers(0, 2**16), st.integers(0, 255)), min_size=1, max_size=4
    ),
    st.booleans(),
)
def test_mutated_frames_raise_only_wire_errors(
    msg: Request | Report, mutations: list[tuple[str, int, int]], reseal: bool
) -> None:
    frame = bytearray(encode(msg))
    for kind, where, byte in mutations:
        at = where % (len(frame) + 1)
        if kind == "flip" and at < len(frame):
            frame[at] ^= 1 << (byte % 8)
        elif kind == "insert":
            frame.insert(at, byte)
        elif kind == "delete" and at < len(frame):
            del frame[at]
        elif kind == "truncate":
            del frame[at:]
        elif kind == "replace" and at < len(frame):
            frame[at] = byte
    data = bytes(frame)
    if reseal and len(data) >= 16:
        data = seal(data[:-4])
    decode_only_wire_errors(data)
