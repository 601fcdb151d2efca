"""The codec's two ways through an option agree. Each direction has a hot path that takes
an option breaking no rule (``_valid_option``) and a rule-by-rule path that finds and
names the first rule broken (``_checked_option``). Every valid option, at and inside
each limit, takes the hot path (else decoding a report gets slower and no result
shows it), and the rule-by-rule path gives the same option and the same bytes."""

from __future__ import annotations

import pytest

from harness.codec import wire
from harness.codec.wire import decode, encode
from harness.data.messages import Action, Outcome, Report, ReportEntry, Request
from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_KEY_BYTES,
    MAX_STRING_BYTES,
    BackendOptions,
    Option,
    OptionsMap,
)

EDGES = (
    Option("t", True),
    Option("f", False),
    Option("k" * MAX_KEY_BYTES, INT32_MIN),
    Option("é" * (MAX_KEY_BYTES // 2), INT32_MAX),
    Option("z", 0),
    Option("e", ""),
    Option("s", "x" * MAX_STRING_BYTES),
    Option("u", "é" * (MAX_STRING_BYTES // 2) + "x"),
)
# Each edge option last in its backend and last in the body, so that it ends exactly
# where the bytes do.
REQUESTS = [Request(Action.SET, OptionsMap((BackendOptions("P", (o,)),))) for o in EDGES] + [
    Request(Action.GET, OptionsMap((BackendOptions("P", EDGES),)))
]
REPORTS = [
    Report(Action.SET, Outcome.OK, facts=(o,), entries=(ReportEntry("P", 0, 1, 0, 1, (o,)),))
    for o in EDGES
]


def _refuse(*_: object) -> None:
    raise AssertionError("a valid option left the hot path")


def test_every_valid_option_takes_the_hot_path(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = [wire.encode_request(r) for r in REQUESTS]
    reports = [wire.encode_report(r) for r in REPORTS]
    monkeypatch.setattr(decode._Reader, "_checked_option", _refuse)
    monkeypatch.setattr(encode._Writer, "_checked_option", _refuse)
    assert [wire.encode_request(r) for r in REQUESTS] == frames
    assert [wire.encode_report(r) for r in REPORTS] == reports
    assert [wire.decode_request(f).options for f in frames] == [r.options for r in REQUESTS]
    assert [wire.decode_report(f) for f in reports] == REPORTS


def test_the_rule_by_rule_path_gives_the_same_options_and_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames = [wire.encode_request(r) for r in REQUESTS]
    reports = [wire.encode_report(r) for r in REPORTS]
    monkeypatch.setattr(decode._Reader, "_valid_option", lambda *_: None)
    monkeypatch.setattr(encode._Writer, "_valid_option", lambda *_: False)
    assert [wire.encode_request(r) for r in REQUESTS] == frames
    assert [wire.encode_report(r) for r in REPORTS] == reports
    assert [wire.decode_request(f).options for f in frames] == [r.options for r in REQUESTS]
    assert [wire.decode_report(f) for f in reports] == REPORTS
    twice = OptionsMap.unchecked([BackendOptions("P", (Option("k", 1), Option("k", 2)))])
    duplicate = Request(Action.SET, twice)
    for refuse in (wire.check_request, lambda r: wire.decode_request(wire.encode_request(r))):
        with pytest.raises(wire.WireError) as raised:
            refuse(duplicate)
        assert raised.value.code is wire.WireErrorCode.DUPLICATE_KEY
