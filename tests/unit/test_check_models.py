"""The per-model check: each model of a LOAD against its own map; leaks between models
are CROSS_MODEL misroutes naming the model the option was sent to."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.check import BackendOutcome, Difference, DifferenceKind, OptionRow
from harness.check.several_models import check_models
from harness.data.messages import (
    ENTRY_FLAG_PROBE,
    Action,
    LoadPath,
    LoadSpec,
    Outcome,
    Report,
    ReportEntry,
    Request,
)
from harness.data.options import Option, OptionsMap, OptionValue

K = DifferenceKind
PAIR = ("ProbeA", "ProbeB")


def entry(name: str, model: int, **options: OptionValue) -> ReportEntry:
    return ReportEntry(
        name,
        0,
        calls=1,
        executes=1,
        flags=ENTRY_FLAG_PROBE,
        options=tuple(Option(k, v) for k, v in options.items()),
        model=model,
    )


def two_models(
    map_a: dict[str, dict[str, OptionValue]],
    map_b: dict[str, dict[str, OptionValue]],
    path_b: LoadPath = LoadPath.MODULE_METHOD,
) -> Request:
    return Request.load(
        "/p/a.pte",
        PAIR,
        OptionsMap.from_dict(map_a),
        models=(LoadSpec("/p/b.pte", PAIR, OptionsMap.from_dict(map_b), path_b),),
    )


def load_report(*entries: ReportEntry) -> Report:
    return Report(Action.LOAD, Outcome.OK, facts=(Option("load_path", "program"),), entries=entries)


REQUEST = two_models(
    {"ProbeA": {"threads": 1}, "ProbeB": {"mode": "a"}}, {"ProbeA": {"threads": 2}}
)


def test_each_model_exact_passes():
    verdicts = check_models(
        REQUEST,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0, mode="a"),
            entry("ProbeA", 1, threads=2),
            entry("ProbeB", 1),
        ),
    )
    assert [v.ok for v in verdicts] == [True, True]


def test_model_b_seeing_model_as_value_is_cross_model():
    verdicts = check_models(
        REQUEST,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0, mode="a"),
            entry("ProbeA", 1, threads=1),
            entry("ProbeB", 1),
        ),
    )
    assert verdicts[0].ok
    (difference,) = verdicts[1].differences
    assert (difference.kind, difference.backend, difference.key) == (
        K.CROSS_MODEL,
        "ProbeA",
        "threads",
    )
    assert (difference.expected, difference.actual, difference.belongs_to) == (2, 1, ("model 0",))
    assert "model 0" in verdicts[1].render() and "CROSS_MODEL" in verdicts[1].render()


def test_a_model_without_a_map_entry_getting_anothers_is_cross_model():
    verdicts = check_models(
        REQUEST,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0, mode="a"),
            entry("ProbeA", 1, threads=2),
            entry("ProbeB", 1, mode="a"),
        ),
    )
    assert verdicts[1].kinds() == (K.CROSS_MODEL,)


def test_an_unrelated_wrong_value_stays_a_wrong_value():
    verdicts = check_models(
        REQUEST,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0, mode="a"),
            entry("ProbeA", 1, threads=7),
            entry("ProbeB", 1),
        ),
    )
    assert verdicts[1].kinds() == (K.WRONG_VALUE,)


def test_entries_of_a_model_the_request_lacks_are_unexpected():
    verdicts = check_models(
        REQUEST,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0, mode="a"),
            entry("ProbeA", 1, threads=2),
            entry("ProbeB", 1),
            entry("ProbeA", 2),
        ),
    )
    assert verdicts[1].kinds() == (K.UNEXPECTED_ENTRY,)


def test_a_model_with_no_entries_was_never_initialised():
    verdicts = check_models(
        REQUEST, load_report(entry("ProbeA", 0, threads=1), entry("ProbeB", 0, mode="a"))
    )
    assert verdicts[1].kinds() == (K.NOT_CALLED, K.NOT_CALLED)


@given(st.lists(st.integers(0, 3), min_size=2, max_size=8), st.data())
def test_any_set_of_models_exact_passes_and_a_swap_is_caught(values, data):
    """Random models, each ProbeA's own threads value; swapping two distinct models'
    entries is caught as CROSS_MODEL in both."""
    models = tuple(
        LoadSpec(f"/p/{n}.pte", ("ProbeA",), OptionsMap.from_dict({"ProbeA": {"threads": v}}))
        for n, v in enumerate(values[1:], 1)
    )
    request = Request.load(
        "/p/0.pte",
        ("ProbeA",),
        OptionsMap.from_dict({"ProbeA": {"threads": values[0]}}),
        models=models,
    )
    entries = [entry("ProbeA", n, threads=v) for n, v in enumerate(values)]
    assert all(v.ok for v in check_models(request, load_report(*entries)))
    distinct = [
        (i, j)
        for i in range(len(values))
        for j in range(i + 1, len(values))
        if values[i] != values[j]
    ]
    if not distinct:
        return
    i, j = data.draw(st.sampled_from(distinct))
    entries[i], entries[j] = (
        dataclasses.replace(entries[j], model=i),
        dataclasses.replace(entries[i], model=j),
    )
    verdicts = check_models(request, load_report(*entries))
    for model in (i, j):
        assert K.CROSS_MODEL in verdicts[model].kinds()


# ---- whole per-model verdicts -------------------------------------------------------------


def test_only_loads_are_checked_per_model():
    request = Request(Action.SET, OptionsMap.from_dict({"ProbeA": {"threads": 1}}))
    with pytest.raises(ValueError, match=r"^check_models checks LOAD requests, not SET$"):
        check_models(request, load_report())


def test_each_verdict_has_its_models_path_and_only_model_0_reads_the_served_path():
    request = two_models({"ProbeA": {"threads": 1}}, {"ProbeA": {"threads": 2}})
    request = dataclasses.replace(request, path=LoadPath.MODULE)
    verdicts = check_models(
        request,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0),
            entry("ProbeA", 1, threads=2),
            entry("ProbeB", 1),
        ),
    )
    assert [v.path for v in verdicts] == [LoadPath.MODULE, LoadPath.MODULE_METHOD]
    assert verdicts[0].differences == (Difference(K.WRONG_PATH, None, None, "module", "program"),)
    assert verdicts[1].ok


def test_unobserved_backends_are_each_models_own():
    request = Request.load(
        "/p/a.pte",
        ("ProbeA", "Real"),
        OptionsMap.from_dict({}),
        models=(LoadSpec("/p/b.pte", ("ProbeA",), OptionsMap.from_dict({})),),
    )
    verdicts = check_models(
        request, load_report(entry("ProbeA", 0), entry("ProbeA", 1)), unobserved={"Real"}
    )
    assert [v.ok for v in verdicts] == [True, True]
    assert verdicts[0].backend("Real") == BackendOutcome("Real", None, 0, None, None)


def test_an_option_a_model_got_twice_is_not_a_leak_from_itself():
    """Model 1's own value received a second time stays an extra option: a model is not
    one of the "other models" its options may leak from."""
    verdicts = check_models(
        REQUEST,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0, mode="a"),
            ReportEntry(
                "ProbeA", 0, 1, 1, ENTRY_FLAG_PROBE, (Option("threads", 2), Option("threads", 2)), 1
            ),
            entry("ProbeB", 1),
        ),
    )
    assert verdicts[1].differences == (
        Difference(
            K.EXTRA_OPTION, "ProbeA", "threads", None, 2, note="a second option with this key"
        ),
    )


def test_a_hook_named_like_another_models_key_is_no_leak():
    """NOT_CALLED's key is the hook (``init``) and its actual the count 0: another model's
    option ``init = 0`` does not make it a CROSS_MODEL misroute."""
    request = two_models({"ProbeA": {"init": 0}}, {"ProbeA": {"threads": 2}})
    verdicts = check_models(request, load_report(entry("ProbeA", 0, init=0), entry("ProbeB", 0)))
    assert verdicts[1].differences == (
        Difference(K.NOT_CALLED, "ProbeA", "init", 1, 0),
        Difference(K.NOT_CALLED, "ProbeB", "init", 1, 0),
    )


def test_a_leak_keeps_its_note_and_is_marked_in_the_rows_too():
    """Model 1's ProbeA gets its own threads, then model 0's: the second is a CROSS_MODEL
    difference that keeps the extra option's note, in the differences and in the rows."""
    verdicts = check_models(
        REQUEST,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0, mode="a"),
            ReportEntry(
                "ProbeA", 0, 1, 1, ENTRY_FLAG_PROBE, (Option("threads", 2), Option("threads", 1)), 1
            ),
            entry("ProbeB", 1),
        ),
    )
    leak = Difference(
        K.CROSS_MODEL, "ProbeA", "threads", None, 1, ("model 0",), "a second option with this key"
    )
    outcome = verdicts[1].backend("ProbeA")
    assert outcome is not None
    assert outcome.differences == (leak,)
    assert outcome.rows == (
        OptionRow(0, Option("threads", 2), 0, Option("threads", 2)),
        OptionRow(None, None, 1, Option("threads", 1), leak),
    )


def test_entries_of_a_model_the_request_lacks_go_to_the_last_models_verdict_whole():
    third = LoadSpec("/p/c.pte", ("ProbeA",), OptionsMap.from_dict({}))
    request = dataclasses.replace(REQUEST, models=(*REQUEST.models, third))
    stray = entry("ProbeB", 5)
    verdicts = check_models(
        request,
        load_report(
            entry("ProbeA", 0, threads=1),
            entry("ProbeB", 0, mode="a"),
            entry("ProbeA", 1, threads=2),
            entry("ProbeB", 1),
            entry("ProbeA", 2),
            stray,
        ),
    )
    assert [(v.path, len(v.backends)) for v in verdicts] == [
        (LoadPath.PROGRAM, 2),
        (LoadPath.MODULE_METHOD, 2),
        (LoadPath.PROGRAM, 1),
    ]
    assert [v.report_differences for v in verdicts] == [
        (),
        (),
        (
            Difference(
                K.UNEXPECTED_ENTRY, "ProbeB", None, None, stray, note="the request has no model 5"
            ),
        ),
    ]
