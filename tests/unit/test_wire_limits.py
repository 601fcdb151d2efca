"""Every limit of docs/wire-format.md, hit exactly at, one below and one above it, on both
sides of the Python codec: the map model refuses past the limit (MapValidationError) and
the decoder refuses a message that carries it (WireError with the limit's code), while at
and below the limit a map round-trips unchanged. (Added beside test_wire.py, which #21
owns, so that a boundary turned from ``>`` into ``>=`` is caught.)"""

from __future__ import annotations

import pytest

from harness.codec import wire
from harness.codec.wire import WireError, WireErrorCode
from harness.data.messages import Action, Request
from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_LOAD_BACKENDS,
    MAX_OPTIONS_PER_BACKEND,
    MAX_STRING_BYTES,
    BackendOptions,
    MapValidationError,
    Option,
    OptionsMap,
)


def one(option: Option, backend: str = "P") -> tuple[BackendOptions, ...]:
    return (BackendOptions(backend, (option,)),)


# name -> (map parts for a size, the limit, the first size over it, code past it); the
# "below" size is limit - 1, the "above" one limit + 1 (for lower limits, mirrored).
UPPER = {
    "string-bytes": (
        lambda n: one(Option("s", "x" * n)),
        MAX_STRING_BYTES,
        WireErrorCode.STRING_LENGTH,
    ),
    "string-bytes-utf8": (
        lambda n: one(Option("s", "é" * (n // 2) + "x" * (n % 2))),
        MAX_STRING_BYTES,
        WireErrorCode.STRING_LENGTH,
    ),
    "key-bytes": (lambda n: one(Option("k" * n, 1)), MAX_KEY_BYTES, WireErrorCode.KEY_LENGTH),
    "id-bytes": (lambda n: one(Option("k", 1), "P" * n), MAX_ID_BYTES, WireErrorCode.ID_LENGTH),
    "options-per-backend": (
        lambda n: (BackendOptions("P", tuple(Option(f"k{i}", i) for i in range(n))),),
        MAX_OPTIONS_PER_BACKEND,
        WireErrorCode.TOO_MANY_OPTIONS,
    ),
    "int-max": (lambda n: one(Option("i", n)), INT32_MAX, WireErrorCode.INT_RANGE),
}
LOWER = {
    "key-bytes-min": (lambda n: one(Option("k" * n, 1)), 1, WireErrorCode.KEY_LENGTH),
    "int-min": (lambda n: one(Option("i", n)), INT32_MIN, WireErrorCode.INT_RANGE),
}


def round_trip(parts: tuple[BackendOptions, ...], action: Action = Action.SET) -> OptionsMap:
    sent = OptionsMap(parts)
    return wire.decode_request(wire.encode_request(Request(action, sent))).options


def refused_by_the_decoder(
    parts: tuple[BackendOptions, ...],
    action: Action = Action.SET,
    program: str = "",
    delegates: tuple[str, ...] = (),
) -> WireErrorCode:
    frame = wire.encode_request(Request(action, OptionsMap.unchecked(parts), program, delegates))
    with pytest.raises(WireError) as refused:
        wire.decode_request(frame)
    return refused.value.code


@pytest.mark.parametrize("name", UPPER)
def test_an_upper_limit_holds_at_and_below_and_is_refused_above(name: str) -> None:
    make, limit, code = UPPER[name]
    for size in (limit - 1, limit):
        assert round_trip(make(size)) == OptionsMap(make(size)), (name, size)
    with pytest.raises(MapValidationError):
        OptionsMap(make(limit + 1))
    assert refused_by_the_decoder(make(limit + 1)) is code


@pytest.mark.parametrize("name", LOWER)
def test_a_lower_limit_holds_at_and_above_and_is_refused_below(name: str) -> None:
    make, limit, code = LOWER[name]
    for size in (limit, limit + 1):
        assert round_trip(make(size)) == OptionsMap(make(size)), (name, size)
    with pytest.raises(MapValidationError):
        OptionsMap(make(limit - 1))
    assert refused_by_the_decoder(make(limit - 1)) is code


def test_backends_per_load_map_hold_at_and_below_and_are_refused_above() -> None:
    def parts(n: int) -> tuple[BackendOptions, ...]:
        return tuple(BackendOptions(f"P{i}", (Option("k", i),)) for i in range(n))

    for n in (MAX_LOAD_BACKENDS - 1, MAX_LOAD_BACKENDS):
        request = Request(Action.LOAD, OptionsMap(parts(n)), "p.pte", ("P0",))
        assert wire.decode_request(wire.encode_request(request)).options == OptionsMap(parts(n))
    with pytest.raises(MapValidationError):
        OptionsMap(parts(MAX_LOAD_BACKENDS + 1))
    code = refused_by_the_decoder(parts(MAX_LOAD_BACKENDS + 1), Action.LOAD, "p.pte", ("P0",))
    assert code is WireErrorCode.TOO_MANY_BACKENDS
