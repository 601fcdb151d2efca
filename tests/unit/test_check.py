"""The exactness check names every way a report differs from what was sent."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wcwidth import wcswidth

from harness.check import (
    DeliveryMismatch,
    Difference,
    DifferenceKind,
    Verdict,
    check_get,
    check_load,
    check_set,
)
from harness.data.messages import ENTRY_FLAG_PROBE, Action, LoadPath, Outcome, Report, ReportEntry
from harness.data.options import BackendOptions, Option, OptionsMap, OptionValue
from harness.data.runtime_error import RuntimeErrorCode

K = DifferenceKind


def probe(
    name: str, *options: tuple[str, OptionValue], status: int = 0, calls: int = 1
) -> ReportEntry:
    """A probe's entry: ``options`` is exactly what the backend received."""
    return ReportEntry(
        name,
        status,
        calls=calls,
        executes=calls,
        flags=ENTRY_FLAG_PROBE,
        options=tuple(Option(k, v) for k, v in options),
    )


def report(*entries: ReportEntry, action: Action = Action.LOAD) -> Report:
    return Report(action, Outcome.OK, entries=entries)


SENT = OptionsMap.from_dict(
    {
        "ProbeA": [("threads", 4), ("fast", True), ("mode", "perf")],
        "ProbeB": [("threads", 2), ("cache", "/tmp/c")],
    }
)
A_EXACT = probe("ProbeA", ("threads", 4), ("fast", True), ("mode", "perf"))
B_EXACT = probe("ProbeB", ("threads", 2), ("cache", "/tmp/c"))


def only(verdict: Verdict) -> Difference:
    """The single difference of ``verdict``; fails with the rendered diff otherwise."""
    assert len(verdict.differences) == 1, verdict.render()
    return verdict.differences[0]


# ---- exact delivery -----------------------------------------------------------------------


def test_exact_load_delivery_is_ok() -> None:
    verdict = check_load(SENT, ("ProbeA", "ProbeB"), report(A_EXACT, B_EXACT))
    assert verdict.ok
    assert verdict.differences == ()
    assert verdict.ignored_backends == ()
    assert [b.name for b in verdict.backends] == ["ProbeA", "ProbeB"]
    assert verdict.summary() == "load: ok, 2 backends as expected"
    verdict.raise_for_differences()
    assert verdict.render().splitlines() == [
        "load check: ok, 2 backends as expected",
        "backend ProbeA: ok, 3 options exact (status Ok (0x00), init called once, "
        "probe registered by the harness)",
        "backend ProbeB: ok, 2 options exact (status Ok (0x00), init called once, "
        "probe registered by the harness)",
    ]


_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # annotated: mypy infers a bare tuple as tuple[str]
_TEXT = st.characters(exclude_categories=_SURROGATES, exclude_characters="\0")


@given(
    st.dictionaries(
        st.text(_TEXT, min_size=1, max_size=8),
        st.one_of(st.booleans(), st.integers(-(2**31), 2**31 - 1), st.text(_TEXT, max_size=8)),
        max_size=6,
    )
)
def test_an_exact_echo_of_any_map_is_ok(options: dict) -> None:
    sent = OptionsMap.from_dict({"ProbeA": options})
    entry = probe("ProbeA", *options.items())
    assert check_load(sent, ("ProbeA",), report(entry)).ok
    assert check_set(sent, report(entry, action=Action.SET)).ok


# ---- one test per kind ----------------------------------------------------------------------


def test_missing_option() -> None:
    entry = probe("ProbeA", ("threads", 4), ("mode", "perf"))
    verdict = check_load(SENT, ("ProbeA",), report(entry))
    assert only(verdict) == Difference(K.MISSING_OPTION, "ProbeA", "fast", True, None)
    assert (
        "  - [1] fast: bool true        (missing)                  <- MISSING_OPTION"
        in verdict.render().splitlines()
    )


def test_extra_option() -> None:
    entry = probe("ProbeB", ("threads", 2), ("cache", "/tmp/c"), ("debug", 1))
    difference = only(check_load(SENT, ("ProbeB",), report(entry)))
    assert difference == Difference(K.EXTRA_OPTION, "ProbeB", "debug", None, 1)


def test_a_key_received_twice_is_an_extra_option() -> None:
    entry = probe("ProbeB", ("threads", 2), ("cache", "/tmp/c"), ("threads", 2))
    difference = only(check_load(SENT, ("ProbeB",), report(entry)))
    assert (difference.kind, difference.key) == (K.EXTRA_OPTION, "threads")
    assert "second option with this key" in difference.describe()


def test_wrong_type_renders_aligned_with_marker() -> None:
    sent = OptionsMap.from_dict({"ProbeB": [("threads", 4), ("fast", True)]})
    entry = probe("ProbeB", ("threads", 4), ("fast", 1), status=0x12)
    verdict = check_load(sent, ("ProbeB",), report(entry))
    assert verdict.kinds() == (K.WRONG_STATUS, K.WRONG_TYPE)
    assert verdict.differences[1] == Difference(K.WRONG_TYPE, "ProbeB", "fast", True, 1)
    assert verdict.render().splitlines() == [
        "load check: 2 differences in 1 backend",
        "backend ProbeB: 2 differences (status InvalidArgument (0x12), init called once, "
        "probe registered by the harness)",
        "    sent                   received",
        "    [0] threads: int 4     [0] threads: int 4",
        "  - [1] fast: bool true    [1] fast: int 1       <- WRONG_TYPE",
        "  - status InvalidArgument (0x12), expected Ok (0x00)  <- WRONG_STATUS",
    ]


@pytest.mark.parametrize(
    ("sent", "received"),
    [(True, 1), (False, 0), (1, True), (0, False), (1, "1"), ("true", True)],
)
def test_bool_int_and_string_never_compare_equal(sent: OptionValue, received: OptionValue) -> None:
    sent_map = OptionsMap.from_dict({"ProbeA": {"k": sent}})
    difference = only(check_load(sent_map, ("ProbeA",), report(probe("ProbeA", ("k", received)))))
    assert difference == Difference(K.WRONG_TYPE, "ProbeA", "k", sent, received)


def test_wrong_value() -> None:
    entry = probe("ProbeB", ("threads", 8), ("cache", "/tmp/c"))
    verdict = check_load(SENT, ("ProbeB",), report(entry))
    assert only(verdict) == Difference(K.WRONG_VALUE, "ProbeB", "threads", 2, 8)
    assert (
        "  - [0] threads: int 2            [0] threads: int 8            <- WRONG_VALUE"
        in verdict.render().splitlines()
    )


def test_wrong_order_reports_both_key_orders() -> None:
    entry = probe("ProbeA", ("mode", "perf"), ("threads", 4), ("fast", True))
    verdict = check_load(SENT, ("ProbeA",), report(entry))
    assert only(verdict) == Difference(
        K.WRONG_ORDER, "ProbeA", None, ("threads", "fast", "mode"), ("mode", "threads", "fast")
    )
    assert (
        "  - options arrived in another order: sent [threads, fast, mode], "
        "received [mode, threads, fast]  <- WRONG_ORDER"
    ) in verdict.render()


def test_misrouted_names_the_backend_the_option_was_sent_to() -> None:
    entry = probe("ProbeB", ("threads", 2), ("cache", "/tmp/c"), ("mode", "perf"))
    verdict = check_load(SENT, ("ProbeA", "ProbeB"), report(A_EXACT, entry))
    assert only(verdict) == Difference(
        K.MISROUTED, "ProbeB", "mode", None, "perf", belongs_to=("ProbeA",)
    )
    assert "<- MISROUTED (sent to ProbeA)" in verdict.render()
    assert verdict.summary() == "load: 1 difference: ProbeB MISROUTED mode"


def test_options_of_an_ignored_backend_are_misrouted_too() -> None:
    sent = OptionsMap.from_dict({"ProbeA": {"threads": 4}, "NotInProgram": {"secret": "x"}})
    entry = probe("ProbeA", ("threads", 4), ("secret", "x"))
    difference = only(check_load(sent, ("ProbeA",), report(entry)))
    assert (difference.kind, difference.belongs_to) == (K.MISROUTED, ("NotInProgram",))


def test_an_option_like_another_backends_but_of_another_type_is_extra_not_misrouted() -> None:
    entry = probe("ProbeB", ("threads", 2), ("cache", "/tmp/c"), ("fast", 1))
    assert only(check_load(SENT, ("ProbeA", "ProbeB"), report(A_EXACT, entry))).kind is (
        K.EXTRA_OPTION
    )


def test_swapped_spans_are_misrouted_both_ways() -> None:
    a_got_b = probe("ProbeA", ("threads", 2), ("cache", "/tmp/c"))
    b_got_a = probe("ProbeB", ("threads", 4), ("fast", True), ("mode", "perf"))
    verdict = check_load(SENT, ("ProbeA", "ProbeB"), report(a_got_b, b_got_a))
    misrouted = {
        (d.backend, d.key, d.belongs_to) for d in verdict.differences if d.kind is K.MISROUTED
    }
    assert misrouted == {
        ("ProbeA", "cache", ("ProbeB",)),
        ("ProbeB", "fast", ("ProbeA",)),
        ("ProbeB", "mode", ("ProbeA",)),
    }
    assert not verdict.ok


def test_nothing_delivered_is_one_difference_not_one_per_key() -> None:
    verdict = check_load(SENT, ("ProbeA",), report(probe("ProbeA")))
    difference = only(verdict)
    assert difference.kind is K.NOTHING_DELIVERED
    sent = SENT.for_backend("ProbeA")
    assert sent is not None
    assert difference.expected == sent.options
    assert difference.actual == ()
    assert (
        "  - received no options; 3 options were sent: [threads, fast, mode]  <- NOTHING_DELIVERED"
        in verdict.render()
    )


def test_not_called_when_a_delegate_has_no_entry() -> None:
    verdict = check_load(SENT, ("ProbeA", "ProbeB"), report(A_EXACT))
    assert only(verdict) == Difference(K.NOT_CALLED, "ProbeB", "init", 1, 0)
    assert "backend ProbeB: 1 difference (no entry in the report)" in verdict.render()
    assert "  - init was never called (expected once)  <- NOT_CALLED" in verdict.render()


def test_not_called_when_a_probe_reports_zero_calls() -> None:
    entry = probe("ProbeA", calls=0)
    verdict = check_load(SENT, ("ProbeA",), report(entry))
    assert verdict.kinds() == (K.NOT_CALLED, K.NOTHING_DELIVERED)


def test_an_unobserved_delegate_may_stay_silent() -> None:
    sent = OptionsMap.from_dict({"XnnpackBackend": {"weight_cache_enabled": True}})
    verdict = check_load(sent, ("XnnpackBackend",), report(), unobserved={"XnnpackBackend"})
    assert verdict.ok
    assert "backend XnnpackBackend: not observed" in verdict.render()


def test_unexpected_delivery_to_a_delegate_without_map_entry() -> None:
    entry = probe("ProbeC", ("threads", 9))
    verdict = check_load(SENT, ("ProbeA", "ProbeC"), report(A_EXACT, entry))
    assert only(verdict) == Difference(K.UNEXPECTED_DELIVERY, "ProbeC", "threads", None, 9)
    assert "it must get an empty span" in verdict.differences[0].describe()


def test_a_delegate_without_map_entry_receiving_nothing_is_ok() -> None:
    verdict = check_load(SENT, ("ProbeA", "ProbeC"), report(A_EXACT, probe("ProbeC")))
    assert verdict.ok
    assert "backend ProbeC: ok, no options, as expected" in verdict.render()


def test_wrong_status_renders_names() -> None:
    sent = OptionsMap.from_dict({"ProbeA": {"threads": 4}})
    entry = probe("ProbeA", ("threads", 4), status=RuntimeErrorCode.NotFound)
    verdict = check_set(sent, report(entry, action=Action.SET))
    assert only(verdict) == Difference(K.WRONG_STATUS, "ProbeA", None, 0, 0x20)
    assert "status NotFound (0x20), expected Ok (0x00)  <- WRONG_STATUS" in verdict.render()


def test_wrong_call_count_when_a_backend_serves_two_delegates() -> None:
    verdict = check_load(SENT, ("ProbeA", "ProbeA"), report(A_EXACT))
    assert only(verdict) == Difference(K.WRONG_CALL_COUNT, "ProbeA", "init", 2, 1)
    assert "init called once, expected 2 times  <- WRONG_CALL_COUNT" in verdict.render()


def test_unexpected_outcome_shows_detail_and_message() -> None:
    failed = Report(Action.LOAD, Outcome.RUNTIME_ERROR, 0x23, "delegate ids differ")
    verdict = check_load(SENT, ("ProbeA",), failed)
    difference = only(verdict)
    assert (difference.kind, difference.actual) == (K.UNEXPECTED_OUTCOME, Outcome.RUNTIME_ERROR)
    assert (
        "  - report outcome runtime_error, expected ok: detail InvalidProgram (0x23), "
        "message 'delegate ids differ'  <- UNEXPECTED_OUTCOME"
    ) in verdict.render()


def test_a_rejected_request_names_the_wire_error() -> None:
    rejected = Report(Action.LOAD, Outcome.REJECTED, 13, "key too long")
    text = check_load(SENT, ("ProbeA",), rejected).render()
    assert "detail KEY_LENGTH (13, a wire error), message 'key too long'" in text


def test_unobserved_names_must_be_delegates() -> None:
    with pytest.raises(ValueError, match="not delegates of the program"):
        check_load(SENT, ("ProbeA",), report(A_EXACT), unobserved={"ProbeB"})


def test_wrong_action() -> None:
    verdict = check_load(SENT, ("ProbeA",), report(A_EXACT, action=Action.SET))
    assert only(verdict) == Difference(K.WRONG_ACTION, None, None, Action.LOAD, Action.SET)


def test_unexpected_entry_for_a_map_backend_not_in_the_program() -> None:
    verdict = check_load(SENT, ("ProbeA",), report(A_EXACT, B_EXACT))
    difference = only(verdict)
    assert (difference.kind, difference.backend, difference.actual) == (
        K.UNEXPECTED_ENTRY,
        "ProbeB",
        B_EXACT,
    )
    assert "its init should never run" in difference.describe()
    assert verdict.ignored_backends == ("ProbeB",)


def test_unexpected_entry_for_an_unknown_name() -> None:
    entry = probe("Stranger")
    difference = only(check_set(SENT, report(A_EXACT, B_EXACT, entry, action=Action.SET)))
    assert (difference.kind, difference.backend) == (K.UNEXPECTED_ENTRY, "Stranger")
    assert "not a backend of the request" in difference.describe()


def test_duplicate_entries() -> None:
    verdict = check_load(SENT, ("ProbeA",), report(A_EXACT, A_EXACT))
    assert only(verdict) == Difference(K.DUPLICATE_ENTRY, "ProbeA", None, 1, 2)


def test_missing_entry_for_a_backend_of_a_set_request() -> None:
    verdict = check_set(SENT, report(A_EXACT, action=Action.SET))
    assert only(verdict) == Difference(K.MISSING_ENTRY, "ProbeB")


# ---- ignored backends, non-probes, SET and GET ---------------------------------------------


def test_ignored_backends_are_reported_and_do_not_fail() -> None:
    verdict = check_load(SENT, ("ProbeB",), report(B_EXACT))
    assert verdict.ok
    assert verdict.ignored_backends == ("ProbeA",)
    assert verdict.summary() == (
        "load: ok, 1 backend as expected; ignored (not in the program): ProbeA"
    )
    assert verdict.render().splitlines()[-1].startswith("ignored backends: ProbeA (in the map")


def test_non_probe_entries_are_checked_for_status_only() -> None:
    sent = OptionsMap.from_dict({"XnnpackBackend": {"weight_cache_enabled": True}})
    real = ReportEntry("XnnpackBackend", 0, options=(Option("whatever", 1),))
    assert check_set(sent, report(real, action=Action.SET)).ok
    failing = ReportEntry("XnnpackBackend", RuntimeErrorCode.InvalidArgument)
    assert check_set(sent, report(failing, action=Action.SET)).kinds() == (K.WRONG_STATUS,)


def test_set_with_an_expected_not_found() -> None:
    sent = OptionsMap.from_dict({"ProbeA": {"threads": 4}, "Unregistered": {"x": 1}})
    entries = (probe("ProbeA", ("threads", 4)), ReportEntry("Unregistered", 0x20))
    verdict = check_set(
        sent, report(*entries, action=Action.SET), {"Unregistered": RuntimeErrorCode.NotFound}
    )
    assert verdict.ok, verdict.render()
    assert "backend Unregistered: ok, options not observable" in verdict.render()


def test_expected_status_for_a_backend_not_in_the_request_is_a_test_error() -> None:
    with pytest.raises(ValueError, match="not in the request"):
        check_set(SENT, report(action=Action.SET), {"Nope": RuntimeErrorCode.NotFound})


def test_set_counts_one_call_per_backend() -> None:
    entry = probe("ProbeB", ("threads", 2), ("cache", "/tmp/c"), calls=2)
    verdict = check_set(SENT, report(A_EXACT, entry, action=Action.SET))
    assert only(verdict) == Difference(K.WRONG_CALL_COUNT, "ProbeB", "set_option", 1, 2)


def test_get_compares_returned_values_with_the_expected_ones() -> None:
    requested = OptionsMap.from_dict({"ProbeA": {"threads": 0, "fast": False}})
    expected = OptionsMap.from_dict({"ProbeA": {"threads": 4, "fast": True}})
    good = report(probe("ProbeA", ("threads", 4), ("fast", True)), action=Action.GET)
    assert check_get(requested, good, expected).ok
    stale = report(probe("ProbeA", ("threads", 0), ("fast", True)), action=Action.GET)
    verdict = check_get(requested, stale, expected)
    assert only(verdict) == Difference(K.WRONG_VALUE, "ProbeA", "threads", 4, 0)
    assert "    expected               returned" in verdict.render().splitlines()


def test_get_without_expected_values_checks_keys_types_and_order_only() -> None:
    requested = OptionsMap.from_dict({"ProbeA": {"threads": 0, "fast": False}})
    filled = report(probe("ProbeA", ("threads", 7), ("fast", True)), action=Action.GET)
    assert check_get(requested, filled).ok
    assert "ok, 2 options of the requested types" in check_get(requested, filled).render()
    retyped = report(probe("ProbeA", ("threads", 7), ("fast", 1)), action=Action.GET)
    assert check_get(requested, retyped).kinds() == (K.WRONG_TYPE,)


def test_get_compares_a_non_probe_span_when_values_are_expected() -> None:
    requested = OptionsMap.from_dict({"XnnpackBackend": {"weight_cache_enabled": False}})
    expected = OptionsMap.from_dict({"XnnpackBackend": {"weight_cache_enabled": True}})
    real = ReportEntry("XnnpackBackend", 0, options=(Option("weight_cache_enabled", False),))
    verdict = check_get(requested, report(real, action=Action.GET), expected)
    assert verdict.kinds() == (K.WRONG_VALUE,)


def test_get_expected_values_for_a_backend_not_requested_is_a_test_error() -> None:
    with pytest.raises(ValueError, match="not in the requested map"):
        check_get(SENT, report(action=Action.GET), OptionsMap.from_dict({"Other": {"k": 1}}))


# ---- rendering ------------------------------------------------------------------------------


def test_unicode_keys_render_aligned() -> None:
    sent = OptionsMap.from_dict({"ProbeA": [("日本語キー", "値"), ("n", 1), ("émoji🙂", 1)]})
    entry = probe("ProbeA", ("日本語キー", "値"), ("n", 2), ("émoji🙂", 1))
    verdict = check_load(sent, ("ProbeA",), report(entry))
    assert verdict.kinds() == (K.WRONG_VALUE,)
    rows = [line for line in verdict.render().splitlines() if "[" in line and "] " in line]
    assert len(rows) == 3
    assert "[0] 日本語キー: string '値'" in rows[0]
    columns = {wcswidth(row[: row.rindex("[")]) for row in rows}
    assert len(columns) == 1, rows  # the received column starts at one display column


def test_keys_with_control_characters_are_shown_quoted() -> None:
    sent = OptionsMap.from_dict({"ProbeA": {"a\tb": 1}})
    verdict = check_load(sent, ("ProbeA",), report(probe("ProbeA", ("a\tb", 2))))
    assert "[0] 'a\\tb': int 1" in verdict.render()
    assert "\t" not in verdict.render()


def test_long_values_are_cut_in_the_table_and_given_in_full_below() -> None:
    long_value = "x" * 200
    sent = OptionsMap.from_dict({"ProbeA": {"path": long_value}})
    entry = probe("ProbeA", ("path", long_value + "y"))
    text = check_load(sent, ("ProbeA",), report(entry)).render()
    assert "…" in text
    assert f"in full: option path: sent string '{long_value}', received string" in text


def test_raise_for_differences_raises_an_assertion_error_with_the_diff() -> None:
    verdict = check_load(SENT, ("ProbeA",), report(probe("ProbeA")))
    with pytest.raises(DeliveryMismatch) as raised:
        verdict.raise_for_differences()
    assert isinstance(raised.value, AssertionError)
    assert raised.value.verdict is verdict
    assert str(raised.value) == verdict.render()


def test_summary_lists_the_first_differences_on_one_line() -> None:
    entries = (probe("ProbeA", ("threads", 1), ("fast", 1), ("mode", 3)), probe("ProbeB"))
    verdict = check_load(SENT, ("ProbeA", "ProbeB", "ProbeC"), report(*entries))
    summary = verdict.summary()
    assert "\n" not in summary
    assert summary == (
        "load: 5 differences: ProbeA WRONG_VALUE threads; ProbeA WRONG_TYPE fast; "
        "ProbeA WRONG_TYPE mode; ProbeB NOTHING_DELIVERED; +1 more"
    )


def test_delegates_may_be_given_as_a_list() -> None:
    sent = OptionsMap((BackendOptions("ProbeA", (Option("k", "v"),)),))
    assert check_load(sent, ["ProbeA"], report(probe("ProbeA", ("k", "v")))).ok


def test_repr_is_the_summary_so_plain_asserts_name_the_differences() -> None:
    verdict = check_load(SENT, ("ProbeA",), report(probe("ProbeA")))
    assert repr(verdict) == "<Verdict load: 1 difference: ProbeA NOTHING_DELIVERED>"


def test_backend_ids_and_keys_that_are_not_plain_text_are_shown_escaped() -> None:
    evil, other = "X\x1b]0;pwn\x07", "Y\u202e"
    sent = OptionsMap.from_dict({other: {"threads": 4}})
    entry = probe(evil, ("threads", 4))
    verdict = check_load(sent, (other, evil), report(probe(other, ("threads", 4)), entry))
    text = verdict.render() + verdict.summary()
    print(text)
    assert not any(c in text for c in "\x1b\x07\u202e")
    assert "'X\\x1b]0;pwn\\x07'" in text and "'Y\\u202e'" in text


# ---- load paths -------------------------------------------------------------------------


def test_load_verdict_carries_its_path_and_names_it_when_not_program() -> None:
    served = Report(
        Action.LOAD,
        Outcome.OK,
        facts=(Option("load_path", "module_both"),),
        entries=report(A_EXACT, B_EXACT).entries,
    )
    verdict = check_load(SENT, ("ProbeA", "ProbeB"), served, path=LoadPath.MODULE_BOTH)
    assert verdict.ok and verdict.path is LoadPath.MODULE_BOTH
    assert verdict.summary() == "load [module_both]: ok, 2 backends as expected"
    first_line = verdict.render().splitlines()[0]
    assert first_line == "load [module_both] check: ok, 2 backends as expected"
    assert check_load(SENT, ("ProbeA", "ProbeB"), report(A_EXACT, B_EXACT)).path is LoadPath.PROGRAM


def test_report_served_on_another_path_is_a_difference() -> None:
    served = Report(
        Action.LOAD,
        Outcome.OK,
        facts=(Option("load_path", "program"),),
        entries=report(A_EXACT, B_EXACT).entries,
    )
    verdict = check_load(SENT, ("ProbeA", "ProbeB"), served, path=LoadPath.MODULE)
    difference = only(verdict)
    assert (difference.kind, difference.expected, difference.actual) == (
        DifferenceKind.WRONG_PATH,
        "module",
        "program",
    )
    assert "served load path 'program', the request asked for 'module'" in verdict.render()


# ---- recorded real backends (docs/agent.md, "Records for real backends") -------------------


XNN = "XnnpackBackend"
XNN_SENT = OptionsMap.from_dict({XNN: [("workspace_sharing_mode", 1), ("x", "y")]})


def recorded(
    name: str,
    *options: tuple[str, OptionValue],
    status: int = 0,
    returned: int = 0,
    calls: int = 1,
) -> ReportEntry:
    """A recorded real backend's entry: what its hook was handed, then the annotations."""
    handed = tuple(Option(k, v) for k, v in options)
    annotations = (
        Option("etb.recorded", len(handed)),
        Option("etb.returned", int(returned)),
        Option("etb.compile_spec:version", 4),
    )
    return ReportEntry(name, status, calls=calls, executes=calls, options=handed + annotations)


def test_a_recorded_real_backend_is_checked_like_a_probe() -> None:
    exact = recorded(XNN, ("workspace_sharing_mode", 1), ("x", "y"))
    assert (exact.is_recorded, exact.is_probe) == (True, False)
    assert exact.compile_specs == (("version", 4),)
    verdict = check_load(XNN_SENT, (XNN,), report(exact), unobserved={XNN}, recorded={XNN})
    assert verdict.ok, verdict.render()
    assert "recorded real backend" in verdict.render()
    swapped = recorded(XNN, ("workspace_sharing_mode", 2), ("x", "y"))
    verdict = check_load(XNN_SENT, (XNN,), report(swapped), unobserved={XNN}, recorded={XNN})
    assert only(verdict).kind is K.WRONG_VALUE


@pytest.mark.parametrize(
    ("handed", "kinds"),
    [
        ((("workspace_sharing_mode", 1), ("x", "y"), ("extra", 1)), (K.EXTRA_OPTION,)),
        ((("workspace_sharing_mode", 1),), (K.MISSING_OPTION,)),
        ((("x", "y"), ("workspace_sharing_mode", 1)), (K.WRONG_ORDER,)),
        ((("workspace_sharing_mode", True), ("x", "y")), (K.WRONG_TYPE,)),
        ((), (K.NOTHING_DELIVERED,)),
    ],
)
def test_silent_faults_on_a_recorded_real_backend_are_differences(
    handed: tuple[tuple[str, OptionValue], ...], kinds: tuple[DifferenceKind, ...]
) -> None:
    verdict = check_load(XNN_SENT, (XNN,), report(recorded(XNN, *handed)), unobserved={XNN})
    assert verdict.kinds() == kinds


def test_an_announced_record_must_be_there() -> None:
    silent = ReportEntry(XNN, 0)
    verdict = check_load(XNN_SENT, (XNN,), report(silent), unobserved={XNN}, recorded={XNN})
    assert only(verdict).kind is K.NOT_RECORDED
    assert "HELLO fact 'recorded'" in verdict.render()
    verdict = check_load(XNN_SENT, (XNN,), report(), unobserved={XNN}, recorded={XNN})
    assert only(verdict).kind is K.NOT_CALLED


def test_a_backend_status_the_runtime_swallowed_is_a_difference() -> None:
    entry = recorded(XNN, ("k", 1), returned=RuntimeErrorCode.InvalidArgument)
    sent = OptionsMap.from_dict({XNN: {"k": 1}})
    verdict = check_set(sent, report(entry, action=Action.SET), recorded={XNN})
    assert only(verdict) == Difference(
        K.BACKEND_STATUS, XNN, "set_option", RuntimeErrorCode.InvalidArgument, 0
    )
    assert "the backend's own set_option returned InvalidArgument" in verdict.render()


def recorded_get(
    name: str,
    left: tuple[tuple[str, OptionValue], ...],
    handed_back: tuple[tuple[str, OptionValue], ...],
) -> ReportEntry:
    """A recorded GET entry: the span as the backend left it, the annotations, then the
    span as the runtime handed it back to its caller and its count (``etb.caller``)."""
    own = tuple(Option(k, v) for k, v in left)
    caller = tuple(Option(k, v) for k, v in handed_back)
    options = (
        *own,
        Option("etb.recorded", len(own)),
        Option("etb.returned", 0),
        *caller,
        Option("etb.caller", len(caller)),
    )
    return ReportEntry(name, 0, calls=1, options=options)


OV = "OpenvinoBackend"
OV_ASKED = OptionsMap.from_dict({OV: {"num_threads": -1, "device": "x"}})


def test_a_recorded_get_is_checked_at_both_ends() -> None:
    same = (("num_threads", -1), ("device", "x"))
    entry = recorded_get(OV, same, same)
    assert entry.delivered == entry.caller_received == OV_ASKED.backends[0].options
    verdict = check_get(OV_ASKED, report(entry, action=Action.GET), OV_ASKED, recorded={OV})
    assert verdict.ok, verdict.render()


def test_a_value_changed_on_its_way_back_to_the_caller_is_a_difference() -> None:
    """The backend left -1; the runtime handed 0 back: both named, at both ends."""
    entry = recorded_get(
        OV, (("num_threads", -1), ("device", "x")), (("num_threads", 0), ("device", "x"))
    )
    verdict = check_get(OV_ASKED, report(entry, action=Action.GET), OV_ASKED, recorded={OV})
    assert verdict.differences == (
        Difference(K.CHANGED_ON_RETURN, OV, "num_threads", -1, 0),
        Difference(
            K.WRONG_VALUE,
            OV,
            "num_threads",
            -1,
            0,
            note="as get_option handed it back to its caller",
        ),
    )
    text = verdict.render()
    assert "the backend's get_option left int -1, but the runtime handed int 0 back" in text
    # Without expected values only keys, types and order count: still caught between ends.
    verdict = check_get(OV_ASKED, report(entry, action=Action.GET), recorded={OV})
    assert verdict.kinds() == (K.CHANGED_ON_RETURN,)
    # One option more on the way back, and a type changed.
    entry = recorded_get(OV, (("num_threads", -1),), (("num_threads", True), ("device", "x")))
    asked = OptionsMap.from_dict({OV: {"num_threads": -1}})
    verdict = check_get(asked, report(entry, action=Action.GET), asked, recorded={OV})
    assert verdict.kinds()[:2] == (K.CHANGED_ON_RETURN, K.CHANGED_ON_RETURN)
    assert verdict.differences[1] == Difference(K.CHANGED_ON_RETURN, OV, "device", None, "x")


def test_a_recorded_get_without_the_callers_end_is_not_recorded() -> None:
    entry = recorded(OV, ("num_threads", -1), ("device", "x"))
    assert entry.caller_received is None
    verdict = check_get(OV_ASKED, report(entry, action=Action.GET), OV_ASKED, recorded={OV})
    assert verdict.differences == (Difference(K.NOT_RECORDED, OV, "get_option", actual=entry),)
    assert "lack the caller's end" in verdict.render()


def test_a_spec_named_like_the_marker_is_an_ordinary_option() -> None:
    entry = recorded(XNN, ("etb.recorded", 7), ("x", "y"))
    assert entry.delivered == (Option("etb.recorded", 7), Option("x", "y"))


# ---- whole differences: kind, backend, key, expected, actual, owners and note ---------------

A_GOT_B = probe("ProbeA", ("threads", 2), ("cache", "/tmp/c"))
B_GOT_A = probe("ProbeB", ("threads", 4), ("fast", True), ("mode", "perf"))
SENT_WITH_A_STRANGER = OptionsMap.from_dict(
    {"ProbeA": {"threads": 4}, "NotInProgram": {"secret": "x"}}
)
WHOLE_DIFFERENCES = {
    "key-received-twice": (
        lambda: check_load(
            SENT,
            ("ProbeB",),
            report(probe("ProbeB", ("threads", 2), ("cache", "/tmp/c"), ("threads", 2))),
        ),
        (
            Difference(
                K.EXTRA_OPTION, "ProbeB", "threads", None, 2, note="a second option with this key"
            ),
        ),
    ),
    "zero-calls": (
        lambda: check_load(SENT, ("ProbeA",), report(probe("ProbeA", calls=0))),
        (
            Difference(K.NOT_CALLED, "ProbeA", "init", 1, 0),
            Difference(K.NOTHING_DELIVERED, "ProbeA", None, SENT.backends[0].options, ()),
        ),
    ),
    "runtime-error": (
        lambda: check_load(
            SENT,
            ("ProbeA",),
            Report(Action.LOAD, Outcome.RUNTIME_ERROR, 0x23, "delegate ids differ"),
        ),
        (
            Difference(
                K.UNEXPECTED_OUTCOME,
                None,
                None,
                Outcome.OK,
                Outcome.RUNTIME_ERROR,
                note="detail InvalidProgram (0x23), message 'delegate ids differ'",
            ),
        ),
    ),
    "entry-of-a-map-backend-not-in-the-program": (
        lambda: check_load(SENT, ("ProbeA",), report(A_EXACT, B_EXACT)),
        (
            Difference(
                K.UNEXPECTED_ENTRY,
                "ProbeB",
                None,
                None,
                B_EXACT,
                note="it is in the map, not a delegate of the program: its init should never run",
            ),
        ),
    ),
    "entry-of-a-stranger": (
        lambda: check_set(SENT, report(A_EXACT, B_EXACT, probe("Stranger"), action=Action.SET)),
        (
            Difference(
                K.UNEXPECTED_ENTRY,
                "Stranger",
                None,
                None,
                probe("Stranger"),
                note="it is not a backend of the request",
            ),
        ),
    ),
    "option-of-an-ignored-backend": (
        lambda: check_load(
            SENT_WITH_A_STRANGER,
            ("ProbeA",),
            report(probe("ProbeA", ("threads", 4), ("secret", "x"))),
        ),
        (Difference(K.MISROUTED, "ProbeA", "secret", None, "x", belongs_to=("NotInProgram",)),),
    ),
    "same-key-other-type-is-extra": (
        lambda: check_load(
            SENT,
            ("ProbeA", "ProbeB"),
            report(A_EXACT, probe("ProbeB", ("threads", 2), ("cache", "/tmp/c"), ("fast", 1))),
        ),
        (Difference(K.EXTRA_OPTION, "ProbeB", "fast", None, 1),),
    ),
    "swapped-spans": (
        lambda: check_load(SENT, ("ProbeA", "ProbeB"), report(A_GOT_B, B_GOT_A)),
        (
            Difference(K.WRONG_VALUE, "ProbeA", "threads", 4, 2),
            Difference(K.MISSING_OPTION, "ProbeA", "fast", True, None),
            Difference(K.MISSING_OPTION, "ProbeA", "mode", "perf", None),
            Difference(K.MISROUTED, "ProbeA", "cache", None, "/tmp/c", belongs_to=("ProbeB",)),
            Difference(K.WRONG_VALUE, "ProbeB", "threads", 2, 4),
            Difference(K.MISSING_OPTION, "ProbeB", "cache", "/tmp/c", None),
            Difference(K.MISROUTED, "ProbeB", "fast", None, True, belongs_to=("ProbeA",)),
            Difference(K.MISROUTED, "ProbeB", "mode", None, "perf", belongs_to=("ProbeA",)),
        ),
    ),
}


@pytest.mark.parametrize("case", WHOLE_DIFFERENCES)
def test_each_difference_names_everything_whole(case: str) -> None:
    """Every field of every difference, in order: a check that named the wrong backend,
    hook, count or owner would fail here, not only one that got the kind wrong."""
    make, expected = WHOLE_DIFFERENCES[case]
    verdict = make()
    assert verdict.differences == expected, verdict.render()
