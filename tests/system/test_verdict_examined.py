"""A verdict with differences cannot pass unnoticed: the ``et`` fixture fails a test that
never examined one, naming the call that made it; an examined verdict, an explicit
``ignore_differences()`` and a verdict without differences pass.

Runs pytest (pytester, in a subprocess) on the host device with the real agent: the real
XnnpackBackend refusing a wrong-typed option gives a real WRONG_STATUS difference
(InvalidArgument where Ok was expected).
"""

from __future__ import annotations

import contextlib

import pytest
from host_pytest import run_on_host

from harness.check import Action, DifferenceKind, Outcome, Report, Verdict, VerdictNotExamined

pytest_plugins = ["pytester"]

CASES = """
from harness.check import DifferenceKind, RuntimeErrorCode
from harness.options import OptionsMap

# XnnpackBackend refuses a bool for an int option (InvalidArgument) where Ok is expected
REFUSED = OptionsMap.from_dict({"XnnpackBackend": {"workspace_sharing_mode": True}})


def test_forgets_the_verdict(et):
    et.set(REFUSED)  # FORGOTTEN


def test_examines_the_verdict(et):
    verdict = et.set(REFUSED)
    assert verdict.kinds() == (DifferenceKind.WRONG_STATUS,)


def test_raises_for_differences(et):
    et.set(OptionsMap.from_dict({"ProbeA": {"threads": 1}})).raise_for_differences()


def test_a_refusal_opts_out(et):
    report = et.set(REFUSED).ignore_differences().report
    assert report.entry("XnnpackBackend").status == RuntimeErrorCode.InvalidArgument


def test_an_exact_verdict_needs_no_examination(et):
    et.set(OptionsMap.from_dict({"ProbeA": {"threads": 2}}))  # EXACT


def set_through_a_helper(et, options):
    return et.set(options)  # HELPER


def test_forgets_through_a_helper(et):
    set_through_a_helper(et, OptionsMap.from_dict({"ProbeA": {"threads": 3}}))
    set_through_a_helper(et, REFUSED)
"""


def line_of(marker: str) -> int:
    return next(n for n, line in enumerate(CASES.splitlines()[1:], 1) if marker in line)


@pytest.mark.slow
def test_forgotten_verdicts_fail_naming_their_call_and_the_rest_pass(
    pytester, request, monkeypatch
):
    result = run_on_host(pytester, request, monkeypatch, test_cases=CASES)
    result.assert_outcomes(passed=4, failed=2)
    failed = {
        line.split("::")[1].split()[0]
        for line in result.outlines
        if line.startswith("FAILED test_cases.py::")
    }
    assert failed == {"test_forgets_the_verdict[host]", "test_forgets_through_a_helper[host]"}
    text = result.stdout.str()
    forgotten, helper = line_of("FORGOTTEN"), line_of("HELPER")
    assert f"test_cases.py:{forgotten} et.set returned a verdict with differences" in text
    assert f"test_cases.py:{helper} et.set returned a verdict with differences" in text
    # One per failing test, in its failure's E lines (the short summary, which pytest
    # truncates to the terminal's width unless CI is set, is not counted): exact
    # verdicts, the helper's first included, are not named.
    named = [
        line
        for line in result.outlines
        if line.startswith("E ") and "returned a verdict with differences" in line
    ]
    assert len(named) == 2, named
    assert "VerdictNotExamined" in text and "ignore_differences()" in text
    assert "XnnpackBackend" in text  # the summary says what differs


def test_examining_marks_a_verdict_and_the_error_names_the_call() -> None:
    """Unit level: which reads count as examining, and what the error says."""
    from harness.check import BackendOutcome, Difference

    def fresh() -> Verdict:
        difference = Difference(DifferenceKind.WRONG_STATUS, "B", expected=0, actual=2)
        outcome = BackendOutcome("B", None, 0, None, None, differences=(difference,))
        report = Report(Action.SET, Outcome.OK)
        return Verdict(Action.SET, report, (outcome,), made_at="t.py:3 et.set")

    untouched = fresh()
    assert untouched.unexamined_differences and not untouched.examined
    _ = untouched.report, untouched.backends, untouched.action  # reading fields is not enough
    assert untouched.unexamined_differences
    for examine in (
        lambda v: v.ok,
        lambda v: v.differences,
        lambda v: v.kinds(),
        lambda v: v.backend("B"),
        lambda v: v.summary(),
        lambda v: v.render(),
        lambda v: v.ignore_differences(),
        lambda v: v.raise_for_differences(),
    ):
        verdict = fresh()
        with contextlib.suppress(AssertionError):
            examine(verdict)
        assert verdict.examined and not verdict.unexamined_differences
    exact = Verdict(Action.SET, Report(Action.SET, Outcome.OK))
    assert not exact.unexamined_differences  # no differences: nothing to examine
    message = str(VerdictNotExamined((fresh(),)))
    assert message.startswith("t.py:3 et.set returned a verdict with differences")
    assert "ignore_differences()" in message
