"""The text of a verdict, whole: the sentence of each kind of difference, the summary and
the rendering line by line (column widths, cut cells, report-level problems, backends
that report nothing). tests/unit/test_check.py checks what the check finds; this, what it
says about it."""

from __future__ import annotations

import pytest

from harness.check import (
    Action,
    Difference,
    DifferenceKind,
    Outcome,
    Report,
    ReportEntry,
    check_get,
    check_load,
    check_set,
    format_value,
)
from harness.data.messages import ENTRY_FLAG_PROBE
from harness.data.options import Option, OptionsMap, OptionValue

K = DifferenceKind
SENT = OptionsMap.from_dict({"ProbeA": {"threads": 4, "fast": True}, "ProbeB": {"cache": "/c"}})
NOT_FOUND = 0x20


def probe(
    name: str, *options: tuple[str, OptionValue], status: int = 0, calls: int = 1
) -> ReportEntry:
    return ReportEntry(
        name, status, calls, calls, ENTRY_FLAG_PROBE, tuple(Option(k, v) for k, v in options)
    )


def report(*entries: ReportEntry, action: Action = Action.LOAD) -> Report:
    return Report(action, Outcome.OK, entries=entries)


A_EXACT = probe("ProbeA", ("threads", 4), ("fast", True))
STRAY = ReportEntry("ProbeC", NOT_FOUND, 2, 0, ENTRY_FLAG_PROBE, (Option("a", 1),))
REAL = ReportEntry("Real", 0, 1)

SENTENCES = [
    (
        Difference(K.MISSING_OPTION, "ProbeA", "fast", False),
        "ProbeA: option fast (bool false) was sent but not received",
    ),
    (
        Difference(K.EXTRA_OPTION, "ProbeA", "debug", None, 1),
        "ProbeA: received option debug (int 1), which was not sent to it",
    ),
    (
        Difference(K.EXTRA_OPTION, "ProbeA", "t", None, 2, note="a second option with this key"),
        "ProbeA: received option t (int 2), which was not sent to it "
        "(a second option with this key)",
    ),
    (
        Difference(K.WRONG_TYPE, "ProbeA", "fast", True, 1),
        "ProbeA: option fast: sent bool true, received int 1",
    ),
    (
        Difference(K.WRONG_VALUE, "ProbeA", "mode", "a", "b"),
        "ProbeA: option mode: sent string 'a', received string 'b'",
    ),
    (
        Difference(K.WRONG_ORDER, "ProbeA", None, ("a", "b"), ("b", "a")),
        "ProbeA: options arrived in another order: sent [a, b], received [b, a]",
    ),
    (
        Difference(K.MISROUTED, "ProbeB", "mode", None, "perf", ("ProbeA", "Probe\x1b")),
        "ProbeB: received option mode (string 'perf'), which was sent to ProbeA and 'Probe\\x1b'",
    ),
    (
        Difference(K.NOTHING_DELIVERED, "ProbeA", None, (Option("a", 1),), ()),
        "ProbeA: received no options; 1 option was sent: [a]",
    ),
    (
        Difference(K.NOTHING_DELIVERED, "ProbeA", None, (Option("a", 1), Option("b", 2)), ()),
        "ProbeA: received no options; 2 options were sent: [a, b]",
    ),
    (
        Difference(K.NOT_CALLED, "ProbeA", "init", 1, 0),
        "ProbeA: init was never called (expected once)",
    ),
    (
        Difference(K.NOT_CALLED, "ProbeA", "init", 2, 0),
        "ProbeA: init was never called (expected 2 times)",
    ),
    (
        Difference(K.UNEXPECTED_DELIVERY, "ProbeC", "threads", None, 9),
        "ProbeC: received option threads (int 9) although no options were sent to it; "
        "it must get an empty span",
    ),
    (
        Difference(K.WRONG_STATUS, "ProbeA", None, 0, NOT_FOUND),
        "ProbeA: status NotFound (0x20), expected Ok (0x00)",
    ),
    (
        Difference(K.WRONG_STATUS, "ProbeA", None, 0, "0x20"),  # a hand-made entry's status
        "ProbeA: status '0x20', expected Ok (0x00)",
    ),
    (
        Difference(K.WRONG_CALL_COUNT, "ProbeA", "set_option", 1, 2),
        "ProbeA: set_option called 2 times, expected once",
    ),
    (
        Difference(K.UNEXPECTED_OUTCOME, None, None, Outcome.OK, Outcome.REJECTED, note="detail 3"),
        "report outcome rejected, expected ok: detail 3",
    ),
    (
        Difference(K.WRONG_ACTION, None, None, Action.LOAD, Action.SET),
        "report answers action set, expected load",
    ),
    (
        Difference(K.WRONG_ACTION, None, None, Action.LOAD, 42),  # a hand-made report's action
        "report answers action 42, expected load",
    ),
    (
        Difference(K.UNEXPECTED_ENTRY, "ProbeC", None, None, STRAY, note="it is not wanted"),
        "ProbeC: has a report entry (status NotFound (0x20), 2 calls, 1 option, probe), "
        "but it is not wanted",
    ),
    (
        Difference(K.UNEXPECTED_ENTRY, "Real", None, None, REAL, note="why"),
        "Real: has a report entry (status Ok (0x00), 1 call, 0 options, not a probe), but why",
    ),
    (
        Difference(K.UNEXPECTED_ENTRY, "Real", actual="Real", note="why"),
        "Real: has a report entry ('Real'), but why",
    ),
    (
        Difference(K.DUPLICATE_ENTRY, "ProbeA", None, 1, 3),
        "ProbeA: has 3 entries in the report, expected one; only the first is checked",
    ),
    (
        Difference(K.MISSING_ENTRY, "ProbeA"),
        "ProbeA: has no entry in the report; expected one per backend of the request",
    ),
    (
        Difference(K.WRONG_PATH, None, None, "module", "program"),
        "the device served load path 'program', the request asked for 'module'",
    ),
    (
        Difference(K.NO_SUCH_BACKEND, "NpuBackend", "init"),
        "NpuBackend: the device has no backend of this name, and the harness registered no "
        "probe under it: no delegate of the program, so the runtime ignores its entry of the "
        "map (a misspelled id? a probe: declare it, probes= or --probe NAME)",
    ),
    (
        Difference(K.NO_SUCH_BACKEND, "NpuBackend", "set_option", 0, NOT_FOUND),
        "NpuBackend: the device has no backend of this name, and the harness registered no "
        "probe under it: set_option returned NotFound (0x20), expected Ok (0x00) (a "
        "misspelled id? a probe: declare it, probes= or --probe NAME)",
    ),
    (
        Difference(K.CROSS_MODEL, "ProbeA", "threads", 2, 1, ("model 0", "model 2")),
        "ProbeA: received option threads (int 1) instead of its own int 2, which was sent to "
        "the same backend in model 0 and model 2",
    ),
    (
        Difference(K.CROSS_MODEL, "ProbeA", "t", None, 1, ("model 0",), "a second option"),
        "ProbeA: received option t (int 1), which was sent to the same backend in model 0 "
        "(a second option)",
    ),
]


@pytest.mark.parametrize(("difference", "sentence"), SENTENCES)
def test_each_kind_of_difference_is_one_whole_sentence(difference: Difference, sentence: str):
    assert difference.describe() == sentence
    backend = f"{difference.backend}: "
    without = sentence.removeprefix(backend) if difference.backend else sentence
    assert difference.describe(with_backend=False) == without


@pytest.mark.parametrize("kind", list(DifferenceKind))
def test_every_kind_has_a_sentence(kind: DifferenceKind) -> None:
    """Also a kind added later, with whatever values: no difference is left unsaid."""
    assert Difference(kind, "B").describe().startswith("B: ")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "bool true"),
        (False, "bool false"),
        (0, "int 0"),
        (-7, "int -7"),
        ("", "string ''"),
        (1.5, "float 1.5"),
        (None, "NoneType None"),
    ],
)
def test_format_value_always_names_the_type(value: object, text: str) -> None:
    assert format_value(value) == text


def test_report_problems_come_first_with_the_outcome_and_entry_count() -> None:
    verdict = check_load(SENT, ("ProbeA",), report(A_EXACT, A_EXACT))
    assert verdict.render().splitlines() == [
        "load check: 1 difference",
        "report (outcome ok, 2 entries):",
        "  - ProbeA: has 2 entries in the report, expected one; only the first is checked"
        "  <- DUPLICATE_ENTRY",
        "backend ProbeA: ok, 2 options exact (status Ok (0x00), init called once, "
        "probe registered by the harness)",
        "ignored backends: ProbeB (in the map but not delegates of the program: the runtime "
        "ignores them, which is not a failure)",
    ]
    verdict = check_load(SENT, ("ProbeB",), report(probe("Stranger")))
    assert verdict.render().splitlines()[:5] == [
        "load check: 2 differences in 1 backend",
        "report (outcome ok, 1 entry):",
        "  - Stranger: has a report entry (status Ok (0x00), 1 call, 0 options, probe), but it "
        "is not a delegate of the program  <- UNEXPECTED_ENTRY",
        "backend ProbeB: 1 difference (no entry in the report)",
        "  - init was never called (expected once)  <- NOT_CALLED",
    ]
    refused = Report(Action.LOAD, Outcome.REJECTED, 13)
    assert check_load(SENT, ("ProbeA",), refused).render().splitlines()[1] == (
        "report (outcome rejected, 0 entries):"
    )


def test_extra_and_misrouted_rows_leave_the_sent_column_empty() -> None:
    """Also: a key with a combining accent takes one column, and backends that report
    nothing on LOAD say so."""
    sent = OptionsMap.from_dict(
        {"ProbeA": {"mode": "x"}, "ProbeB": {"mode": "x"}, "ProbeC": {"k": 1}, "Real": {"w": 1}}
    )
    received = probe("ProbeC", ("k", 1), ("mode", "x"), ("e\u0301", False))
    verdict = check_load(sent, ("ProbeC", "Real"), report(received), unobserved={"Real"})
    assert verdict.render().splitlines()[1:6] == [
        "backend ProbeC: 2 differences (status Ok (0x00), init called once, "
        "probe registered by the harness)",
        "    sent            received",
        "    [0] k: int 1    [0] k: int 1",
        "  -                 [1] mode: string 'x'    <- MISROUTED (sent to ProbeA and ProbeB)",
        "  -                 [2] e\u0301: bool false       <- EXTRA_OPTION",
    ]
    assert verdict.render().splitlines()[6] == (
        "backend Real: not observed (not a probe, reports nothing on load)"
    )
    assert (
        verdict.summary()
        == "load: 2 differences: ProbeC MISROUTED mode; ProbeC EXTRA_OPTION e\u0301"
    )


def test_a_non_probe_says_so_in_its_facts() -> None:
    sent = OptionsMap.from_dict({"Unregistered": {"x": 1}})
    served = report(ReportEntry("Unregistered", NOT_FOUND), action=Action.SET)
    verdict = check_set(sent, served, {"Unregistered": NOT_FOUND})
    assert verdict.render().splitlines() == [
        "set check: ok, 1 backend as expected",
        "backend Unregistered: ok, options not observable (status NotFound (0x20), not a probe)",
    ]


def test_a_get_without_expected_values_heads_its_column_as_not_compared() -> None:
    requested = OptionsMap.from_dict({"ProbeA": {"threads": 0}})
    verdict = check_get(requested, report(probe("ProbeA", ("threads", "4")), action=Action.GET))
    assert verdict.render().splitlines()[2:] == [
        "    requested (values not compared)    returned",
        "  - [0] threads: int 0                 [0] threads: string '4'    <- WRONG_TYPE",
    ]


def test_a_get_says_what_was_expected_and_what_was_returned_never_sent_or_received() -> None:
    asked = OptionsMap.from_dict({"ProbeA": {"threads": 0, "fast": False, "mode": ""}})
    expected = OptionsMap.from_dict({"ProbeA": {"threads": 3, "fast": True, "mode": "a"}})
    entry = probe("ProbeA", ("threads", 2), ("fast", 1), ("extra", 5))
    verdict = check_get(asked, report(entry, action=Action.GET), expected)
    assert [d.describe() for d in verdict.differences] == [
        "ProbeA: option threads: expected int 3, returned int 2",
        "ProbeA: option fast: expected bool true, returned int 1",
        "ProbeA: option mode (string 'a') was expected but not returned",
        "ProbeA: returned option extra (int 5), which was not asked of it",
    ]
    nothing = check_get(asked, report(probe("ProbeA"), action=Action.GET), expected)
    assert nothing.differences[0].describe() == (
        "ProbeA: returned no options; 3 options were expected: [threads, fast, mode]"
    )
    swapped = report(
        probe("ProbeA", ("fast", True), ("threads", 3), ("mode", "a")), action=Action.GET
    )
    assert check_get(asked, swapped, expected).differences[0].describe() == (
        "ProbeA: options returned in another order: expected [threads, fast, mode], "
        "returned [fast, threads, mode]"
    )
    text = verdict.render()
    assert "sent" not in text and "received" not in text, text


def test_a_summary_of_four_differences_lists_all_four() -> None:
    entry = probe("ProbeA", ("threads", 1), ("fast", 1))
    verdict = check_load(SENT, ("ProbeA", "ProbeB", "ProbeC"), report(entry))
    assert verdict.summary() == (
        "load: 4 differences: ProbeA WRONG_VALUE threads; ProbeA WRONG_TYPE fast; "
        "ProbeB NOT_CALLED; ProbeC NOT_CALLED"
    )
    wrong_action = check_set(SENT, report(action=Action.GET))
    assert wrong_action.summary() == "set: 1 difference: report WRONG_ACTION"


def _cell_lines(sent: str, received: str) -> list[str]:
    sent_map = OptionsMap.from_dict({"ProbeA": {"k": sent}})
    verdict = check_load(sent_map, ("ProbeA",), report(probe("ProbeA", ("k", received))))
    return verdict.render().splitlines()[2:]


def test_a_cell_of_exactly_44_columns_is_not_cut() -> None:
    sent, received = "a" * 28, "b" * 28  # "[0] k: string '" + 28 + "'": 44 columns
    assert _cell_lines(sent, received) == [
        "    sent" + " " * 44 + "received",
        f"  - [0] k: string '{sent}'    [0] k: string '{received}'    <- WRONG_VALUE",
    ]


def test_a_longer_cell_is_cut_to_44_columns_and_given_in_full_below() -> None:
    sent, received = "a" * 29, "b"
    cut = "[0] k: string '" + "a" * 28 + "…"
    assert _cell_lines(sent, received) == [
        "    sent" + " " * 44 + "received",
        f"  - {cut}    [0] k: string 'b'    <- WRONG_VALUE",
        f"      in full: option k: sent string '{sent}', received string 'b'",
    ]


def test_wide_characters_are_cut_by_columns() -> None:
    sent = "日" * 20  # "[0] k: string '" (15 columns) and 40 columns of wide characters
    cut = "[0] k: string '" + "日" * 14 + "…"  # 43 columns, and the ellipsis
    assert _cell_lines(sent, "b")[1] == f"  - {cut}    [0] k: string 'b'    <- WRONG_VALUE"


def test_combining_characters_take_no_column_when_a_cell_is_cut() -> None:
    sent = "e\u0301" * 30  # 30 columns of accented letters, 60 characters
    cut = "[0] k: string '" + "e\u0301" * 28 + "…"  # 43 columns, and the ellipsis
    assert _cell_lines(sent, "b")[1] == f"  - {cut}    [0] k: string 'b'    <- WRONG_VALUE"
