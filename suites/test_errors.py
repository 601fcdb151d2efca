"""Errors are reported as the runtime and the agent give them, and nothing breaks the agent."""

from __future__ import annotations

import pytest

from harness.check import Action, Outcome, Request, RuntimeErrorCode, WireErrorCode
from harness.options import (
    MAX_OPTIONS_PER_BACKEND,
    BackendOptions,
    MapValidationError,
    Option,
    OptionsMap,
)
from harness.runner import encode_request

from .maps import distinct_map, single

OUT_OF_SPEC_OPTIONS = {
    "key-64-bytes": (Option("k" * 64, 1), WireErrorCode.KEY_LENGTH, "63"),
    "key-empty": (Option("", 1), WireErrorCode.KEY_LENGTH, "1..63"),
    "key-with-nul": (Option("a\0b", 1), WireErrorCode.NUL, "NUL"),
    "string-256-bytes": (Option("s", "x" * 256), WireErrorCode.STRING_LENGTH, "255"),
    "string-with-nul": (Option("s", "x\0y"), WireErrorCode.NUL, "NUL"),
    "int-above-int32": (Option("i", 2**31), WireErrorCode.INT_RANGE, "2147483647"),
    "int-below-int32": (Option("i", -(2**31) - 1), WireErrorCode.INT_RANGE, "-2147483648"),
}


def _with_option(option: Option, backend: str = "ProbeA") -> tuple[BackendOptions, ...]:
    return (BackendOptions(backend, (Option("fine", 1), option)),)


@pytest.mark.parametrize(
    "option, code, limit", OUT_OF_SPEC_OPTIONS.values(), ids=OUT_OF_SPEC_OPTIONS.keys()
)
def test_out_of_spec_map_is_refused_on_the_host(option, code, limit):
    with pytest.raises(MapValidationError) as refused:
        OptionsMap(_with_option(option))
    message = str(refused.value)
    assert "backends.ProbeA[1]" in message and limit in message


@pytest.mark.parametrize("action", [Action.LOAD, Action.SET])
@pytest.mark.parametrize(
    "option, code, limit", OUT_OF_SPEC_OPTIONS.values(), ids=OUT_OF_SPEC_OPTIONS.keys()
)
def test_out_of_spec_frame_is_refused_by_the_agent_which_keeps_serving(
    et, probe_program, action, option, code, limit
):
    et.prepare(["ProbeA"])
    options = OptionsMap.unchecked(_with_option(option))
    program = probe_program(("ProbeA",)) if action is Action.LOAD else ""
    delegates = ("ProbeA",) if action is Action.LOAD else ()
    report = et.send(Request(action, options, program, delegates))
    assert (report.outcome, WireErrorCode(report.detail)) == (Outcome.REJECTED, code)
    assert report.entries == ()
    et.reset()
    et.set(distinct_map(("ProbeA",))).raise_for_differences()


OUT_OF_SPEC_MAPS = {
    "9-backends-in-load": (
        OptionsMap.unchecked(BackendOptions(f"P{i}", (Option("k", i),)) for i in range(9)),
        WireErrorCode.TOO_MANY_BACKENDS,
    ),
    "65-options": (
        OptionsMap.unchecked(
            (BackendOptions("ProbeA", tuple(Option(f"k{i}", i) for i in range(65))),)
        ),
        WireErrorCode.TOO_MANY_OPTIONS,
    ),
    "duplicate-key": (
        OptionsMap.unchecked((BackendOptions("ProbeA", (Option("k", 1), Option("k", 2))),)),
        WireErrorCode.DUPLICATE_KEY,
    ),
    "duplicate-backend": (
        OptionsMap.unchecked((BackendOptions("ProbeA", ()), BackendOptions("ProbeA", ()))),
        WireErrorCode.DUPLICATE_BACKEND,
    ),
    "backend-id-64-bytes": (
        OptionsMap.unchecked((BackendOptions("P" * 64, (Option("k", 1),)),)),
        WireErrorCode.ID_LENGTH,
    ),
}


@pytest.mark.parametrize("options, code", OUT_OF_SPEC_MAPS.values(), ids=OUT_OF_SPEC_MAPS.keys())
def test_out_of_spec_load_map_is_refused_by_the_agent(et, probe_program, options, code):
    et.prepare(["ProbeA"])
    report = et.send(Request(Action.LOAD, options, probe_program(("ProbeA",)), ("ProbeA",)))
    assert (report.outcome, WireErrorCode(report.detail)) == (Outcome.REJECTED, code)
    et.reset()
    et.load(distinct_map(("ProbeA",))).raise_for_differences()


@pytest.mark.parametrize("action", [Action.LOAD, Action.SET], ids=["load", "set"])
def test_one_option_beyond_the_devices_capacity_is_refused(et, probe_program, action):
    """A device announces how many options per backend its RAM holds (options_per_backend);
    one more is refused with CAPACITY and a message naming the limit. At the wire's own
    limit (64) the 65th is TOO_MANY_OPTIONS."""
    et.prepare(["ProbeA"])
    limit = et.options_per_backend
    over = OptionsMap.unchecked(
        (BackendOptions("ProbeA", tuple(Option(f"k{i}", i % 2 == 0) for i in range(limit + 1))),)
    )
    program = probe_program(("ProbeA",)) if action is Action.LOAD else ""
    delegates = ("ProbeA",) if action is Action.LOAD else ()
    report = et.send(Request(action, over, program, delegates))
    if limit < MAX_OPTIONS_PER_BACKEND:
        assert (report.outcome, WireErrorCode(report.detail)) == (
            Outcome.REJECTED,
            WireErrorCode.CAPACITY,
        ), report.message
        assert f"at most {limit} per backend" in report.message
    else:
        assert (report.outcome, WireErrorCode(report.detail)) == (
            Outcome.REJECTED,
            WireErrorCode.TOO_MANY_OPTIONS,
        ), report.message
    assert report.entries == ()
    et.reset()
    et.set(distinct_map(("ProbeA",))).raise_for_differences()


def test_corrupted_frame_is_refused_and_the_agent_keeps_serving(et):
    frame = bytearray(encode_request(Request(Action.SET, distinct_map(("ProbeA",)), seq=77)))
    frame[-1] ^= 0xFF
    report = et.send_raw(bytes(frame), seq=77)
    assert (report.outcome, WireErrorCode(report.detail)) == (Outcome.REJECTED, WireErrorCode.CRC)
    et.reset()
    et.set(distinct_map(("ProbeA",))).raise_for_differences()


def test_unknown_backend_set_option_gives_not_found(et):
    options = distinct_map(("ProbeA", "NoSuchBackend"))
    verdict = et.set(options, expected_status={"NoSuchBackend": RuntimeErrorCode.NotFound})
    verdict.raise_for_differences()


def test_unknown_backend_get_option_gives_not_found(et):
    verdict = et.get(
        single("NoSuchBackend", Option("threads", 0)),
        expected_status={"NoSuchBackend": RuntimeErrorCode.NotFound},
    )
    verdict.raise_for_differences()


def test_registering_a_name_twice_gives_invalid_argument(et):
    et.prepare(["ProbeA"])
    report = et.register(["ProbeA"])
    assert [(e.name, e.status) for e in report.entries] == [
        ("ProbeA", RuntimeErrorCode.InvalidArgument)
    ]


def test_full_registry_gives_internal(et):
    et.restart()
    room = et.capacity - len(et.registered)
    filled = et.register([f"Filler{i}" for i in range(room)])
    assert [e.status for e in filled.entries] == [RuntimeErrorCode.Ok] * room
    overflow = et.register(["OneTooMany"])
    assert [(e.name, e.status) for e in overflow.entries] == [
        ("OneTooMany", RuntimeErrorCode.Internal)
    ]
    et.restart()
