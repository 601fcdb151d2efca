"""Whole verdicts: every field the check fills in (action, report, each backend's outcome
with its expected status, calls and options and its aligned rows, the report's
differences, ignored backends, load path), compared at once. A check that put the
wrong status, count, row or report into a verdict fails here, not only one that got
a difference's kind wrong (tests/unit/test_check.py)."""

from __future__ import annotations

import pytest

from harness.check import (
    BackendOutcome,
    Difference,
    DifferenceKind,
    OptionRow,
    Verdict,
    VerdictNotExamined,
    check_get,
    check_load,
    check_set,
)
from harness.data.messages import ENTRY_FLAG_PROBE, Action, LoadPath, Outcome, Report, ReportEntry
from harness.data.options import Option, OptionsMap
from harness.data.runtime_error import RuntimeErrorCode

K = DifferenceKind
OK = RuntimeErrorCode.Ok
THREADS, FAST, CACHE = Option("threads", 4), Option("fast", True), Option("cache", "/c")
SENT = OptionsMap.from_dict({"ProbeA": {"threads": 4, "fast": True}, "ProbeB": {"cache": "/c"}})


def probe(name: str, *options: Option, status: int = 0, calls: int = 1) -> ReportEntry:
    return ReportEntry(name, status, calls, calls, ENTRY_FLAG_PROBE, options)


def report(*entries: ReportEntry, action: Action = Action.LOAD) -> Report:
    return Report(action, Outcome.OK, entries=entries)


def exact_rows(*options: Option) -> tuple[OptionRow, ...]:
    return tuple(OptionRow(i, o, i, o) for i, o in enumerate(options))


def exact(name: str, *options: Option, calls: int = 1) -> BackendOutcome:
    """The outcome of a probe that got exactly ``options``."""
    return BackendOutcome(
        name, probe(name, *options, calls=calls), OK, calls, options, exact_rows(*options)
    )


# ---- LOAD ---------------------------------------------------------------------------------


def test_an_exact_load_is_one_exact_outcome_per_delegate() -> None:
    served = report(probe("ProbeA", THREADS, FAST), probe("ProbeB", CACHE))
    assert check_load(SENT, ("ProbeA", "ProbeB"), served) == Verdict(
        Action.LOAD,
        served,
        (exact("ProbeA", THREADS, FAST), exact("ProbeB", CACHE)),
        path=LoadPath.PROGRAM,
    )


def test_a_refused_load_keeps_its_ignored_backends_and_path() -> None:
    refused = Report(Action.LOAD, Outcome.UNSUPPORTED, 7, "no LOAD here")
    verdict = check_load(SENT, ("ProbeA",), refused, path=LoadPath.MODULE)
    outcome = Difference(
        K.UNEXPECTED_OUTCOME,
        None,
        None,
        Outcome.OK,
        Outcome.UNSUPPORTED,
        note="detail 7, message 'no LOAD here'",
    )
    assert verdict == Verdict(Action.LOAD, refused, (), (outcome,), ("ProbeB",), LoadPath.MODULE)


def test_a_failure_without_a_message_says_so() -> None:
    failed = Report(Action.SET, Outcome.RUNTIME_ERROR, 0x23)
    assert check_set(SENT, failed) == Verdict(
        Action.SET,
        failed,
        (),
        (
            Difference(
                K.UNEXPECTED_OUTCOME,
                None,
                None,
                Outcome.OK,
                Outcome.RUNTIME_ERROR,
                note="detail InvalidProgram (0x23), no message",
            ),
        ),
    )


def test_a_silent_unobserved_delegate_and_a_missing_one_after_it() -> None:
    sent = OptionsMap.from_dict({"Real": {"k": 1}, "ProbeA": {"threads": 4}})
    served = report()
    verdict = check_load(sent, ("Real", "ProbeA", "ProbeA"), served, unobserved={"Real"})
    not_called = Difference(K.NOT_CALLED, "ProbeA", "init", 2, 0)
    assert verdict == Verdict(
        Action.LOAD,
        served,
        (
            BackendOutcome("Real", None, OK, None, None),
            BackendOutcome("ProbeA", None, OK, 2, None, (), (not_called,)),
        ),
        path=LoadPath.PROGRAM,
    )


def test_an_unobserved_delegate_that_reports_is_checked_for_status_only() -> None:
    sent = OptionsMap.from_dict({"Real": {"k": 1}})
    real = ReportEntry("Real", 0, 1, 0, 0, (Option("other", "x"),))
    served = report(real)
    assert check_load(sent, ("Real",), served, unobserved={"Real"}) == Verdict(
        Action.LOAD, served, (BackendOutcome("Real", real, OK, None, None),), path=LoadPath.PROGRAM
    )


def test_an_entry_of_no_delegate_and_no_map_entry_is_unexpected() -> None:
    strays = (probe("Stranger"), probe("Other"))
    verdict = check_load(SENT, ("ProbeB",), report(probe("ProbeB", CACHE), *strays))
    assert verdict.report_differences == tuple(
        Difference(K.UNEXPECTED_ENTRY, e.name, actual=e, note="it is not a delegate of the program")
        for e in strays
    )
    assert verdict.ignored_backends == ("ProbeA",)


def test_nothing_delivered_keeps_one_row_per_sent_option() -> None:
    entry = probe("ProbeA", calls=2)
    verdict = check_load(SENT, ("ProbeA", "ProbeA"), report(entry))
    nothing = Difference(K.NOTHING_DELIVERED, "ProbeA", None, (THREADS, FAST), ())
    assert verdict.backends == (
        BackendOutcome(
            "ProbeA",
            entry,
            OK,
            2,
            (THREADS, FAST),
            (OptionRow(0, THREADS, None, None), OptionRow(1, FAST, None, None)),
            (nothing,),
        ),
    )


def test_rows_pair_options_by_key_and_keep_the_unpaired_received_ones() -> None:
    other = Option("threads", 2)
    extra, again = Option("debug", 1), Option("threads", 4)
    entry = probe("ProbeA", other, extra, again, status=RuntimeErrorCode.InvalidArgument)
    verdict = check_load(SENT, ("ProbeA",), report(entry))
    wrong = Difference(K.WRONG_VALUE, "ProbeA", "threads", 4, 2)
    missing = Difference(K.MISSING_OPTION, "ProbeA", "fast", True)
    extra_difference = Difference(K.EXTRA_OPTION, "ProbeA", "debug", None, 1)
    twice = Difference(
        K.EXTRA_OPTION, "ProbeA", "threads", None, 4, note="a second option with this key"
    )
    status = Difference(K.WRONG_STATUS, "ProbeA", None, OK, RuntimeErrorCode.InvalidArgument)
    assert verdict.backends == (
        BackendOutcome(
            "ProbeA",
            entry,
            OK,
            1,
            (THREADS, FAST),
            (
                OptionRow(0, THREADS, 0, other, wrong),
                OptionRow(1, FAST, None, None, missing),
                OptionRow(None, None, 1, extra, extra_difference),
                OptionRow(None, None, 2, again, twice),
            ),
            (status, wrong, missing, extra_difference, twice),
        ),
    )


# ---- SET and GET --------------------------------------------------------------------------


def test_a_set_answered_as_another_action_has_no_backends() -> None:
    served = report(probe("ProbeA", THREADS, FAST), probe("ProbeB", CACHE), action=Action.GET)
    assert check_set(SENT, served) == Verdict(
        Action.SET, served, (), (Difference(K.WRONG_ACTION, None, None, Action.SET, Action.GET),)
    )


def test_a_missing_entry_keeps_its_expected_status_and_the_next_backend_is_checked() -> None:
    served = report(probe("ProbeB", CACHE, status=RuntimeErrorCode.NotFound), action=Action.SET)
    statuses = {"ProbeA": RuntimeErrorCode.NotSupported, "ProbeB": RuntimeErrorCode.NotFound}
    verdict = check_set(SENT, served, statuses)
    assert verdict == Verdict(
        Action.SET,
        served,
        (
            BackendOutcome(
                "ProbeA",
                None,
                RuntimeErrorCode.NotSupported,
                None,
                None,
                (),
                (Difference(K.MISSING_ENTRY, "ProbeA"),),
            ),
            BackendOutcome(
                "ProbeB",
                served.entries[0],
                RuntimeErrorCode.NotFound,
                1,
                (CACHE,),
                exact_rows(CACHE),
            ),
        ),
    )


def test_a_non_probe_with_another_status_is_compared_for_status_only() -> None:
    real = ReportEntry("ProbeB", RuntimeErrorCode.NotFound, 1, 0, 0, (Option("x", 1),))
    served = report(probe("ProbeA", THREADS, FAST), real, action=Action.SET)
    verdict = check_set(SENT, served)
    status = Difference(K.WRONG_STATUS, "ProbeB", None, OK, RuntimeErrorCode.NotFound)
    assert verdict.backends[1] == BackendOutcome("ProbeB", real, OK, None, None, (), (status,))


def test_get_with_expected_values_compares_a_non_probe_span_without_counting_calls() -> None:
    requested = OptionsMap.from_dict({"Real": {"k": 0}})
    expected = OptionsMap.from_dict({"Real": {"k": 5}})
    real = ReportEntry("Real", 0, 3, 0, 0, (Option("k", 5),))
    served = report(real, action=Action.GET)
    assert check_get(requested, served, expected) == Verdict(
        Action.GET,
        served,
        (BackendOutcome("Real", real, OK, None, (Option("k", 5),), exact_rows(Option("k", 5))),),
    )


def test_get_without_expected_values_keeps_the_requested_ones_unchecked() -> None:
    requested = OptionsMap.from_dict({"ProbeA": {"threads": 0}})
    filled = probe("ProbeA", THREADS)
    served = report(filled, action=Action.GET)
    assert check_get(requested, served) == Verdict(
        Action.GET,
        served,
        (
            BackendOutcome(
                "ProbeA",
                filled,
                OK,
                1,
                (Option("threads", 0),),
                (OptionRow(0, Option("threads", 0), 0, THREADS),),
                values_checked=False,
            ),
        ),
    )


# ---- the verdict's own behaviour ----------------------------------------------------------


def test_backend_finds_the_outcome_by_name() -> None:
    verdict = check_load(SENT, ("ProbeA", "ProbeB"), report())
    assert verdict.backend("ProbeB") is verdict.backends[1]
    assert verdict.backend("ProbeA") is verdict.backends[0]
    assert verdict.backend("Nobody") is None


def test_a_fresh_verdict_is_not_examined() -> None:
    verdict = check_load(SENT, ("ProbeA",), report())
    assert verdict.examined is False
    assert verdict.unexamined_differences is True


def test_the_forgotten_check_error_names_each_verdict_and_what_to_do() -> None:
    made = check_load(SENT, ("ProbeA",), report())
    named = Verdict(made.action, made.report, made.backends, made_at="suites/test_x.py:7 et.load")
    error = VerdictNotExamined((made, named))
    assert error.verdicts == (made, named)
    summary = "load: 1 difference: ProbeA NOT_CALLED"
    assert str(error) == (
        f"a check returned a verdict with differences that the test never examined: {summary}\n"
        "suites/test_x.py:7 et.load returned a verdict with differences that the test never "
        f"examined: {summary}\n"
        "check it with verdict.raise_for_differences() (or assert on verdict.ok / "
        "verdict.kinds()); a test of a refusal that asserts on verdict.report alone says so "
        "with verdict.ignore_differences()"
    )


@pytest.mark.parametrize("path", [LoadPath.PROGRAM, LoadPath.MODULE, LoadPath.MODULE_BOTH])
def test_the_label_names_a_path_other_than_program(path: LoadPath) -> None:
    verdict = Verdict(Action.LOAD, report(), path=path)
    assert verdict.label == ("load" if path is LoadPath.PROGRAM else f"load [{path.label}]")
