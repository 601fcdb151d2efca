"""Sequences of calls: reloads, set_option around loads and executes, resets."""

from __future__ import annotations

from harness.check import Outcome
from harness.options import Option, OptionsMap

from .maps import distinct_map, single


def test_second_load_with_a_different_map_replaces_the_first(et, load_path):
    et.load(distinct_map(("ProbeA", "ProbeB")), path=load_path).raise_for_differences()
    second = single("ProbeB", Option("threads", 99), Option("late", True))
    verdict = et.load(second, delegates=("ProbeA", "ProbeB"), path=load_path)
    verdict.raise_for_differences()
    assert verdict.report.entry("ProbeA").options == ()


def test_set_option_before_load_does_not_leak_into_runtime_specs(et, load_path):
    et.set(single("ProbeA", Option("global_only", 1))).raise_for_differences()
    et.load(single("ProbeA", Option("load_only", 2)), path=load_path).raise_for_differences()
    et.get(
        single("ProbeA", Option("global_only", 0)),
        expected=single("ProbeA", Option("global_only", 1)),
    ).raise_for_differences()


def test_set_option_after_load_and_between_executes(et, load_path):
    et.load(distinct_map(("ProbeA", "ProbeB")), path=load_path).raise_for_differences()
    et.set(single("ProbeA", Option("step", 1))).raise_for_differences()
    first = et.execute()
    assert first.outcome is Outcome.OK
    assert {e.name: e.executes for e in first.entries} == {"ProbeA": 1, "ProbeB": 1}
    et.set(single("ProbeB", Option("step", 2))).raise_for_differences()
    second = et.execute()
    assert {e.name: e.executes for e in second.entries} == {"ProbeA": 1, "ProbeB": 1}
    et.get(
        OptionsMap.from_dict({"ProbeA": {"step": 0}, "ProbeB": {"step": 0}}),
        expected=OptionsMap.from_dict({"ProbeA": {"step": 1}, "ProbeB": {"step": 2}}),
    ).raise_for_differences()


def test_later_set_option_replaces_value_of_same_key(et):
    et.set(single("ProbeA", Option("level", 1))).raise_for_differences()
    et.set(single("ProbeA", Option("level", 2))).raise_for_differences()
    et.get(
        single("ProbeA", Option("level", 0)), expected=single("ProbeA", Option("level", 2))
    ).raise_for_differences()


def test_after_reset_nothing_leaks_into_the_next_case(et, load_path):
    et.set(single("ProbeA", Option("secret", 42))).raise_for_differences()
    et.load(distinct_map(("ProbeA",)), path=load_path).raise_for_differences()
    et.reset()
    untouched = single("ProbeA", Option("secret", -7))
    et.get(untouched, expected=untouched).raise_for_differences()
    verdict = et.load(OptionsMap(), delegates=("ProbeA",), path=load_path)
    verdict.raise_for_differences()
    assert verdict.report.entry("ProbeA").calls == 1


def test_load_time_specs_do_not_change_the_global_get_option(et, load_path):
    et.set(single("ProbeA", Option("shared", 1))).raise_for_differences()
    et.load(
        single("ProbeA", Option("shared", 2), Option("load_only", True)), path=load_path
    ).raise_for_differences()
    et.get(
        single("ProbeA", Option("shared", 0), Option("load_only", False)),
        expected=single("ProbeA", Option("shared", 1), Option("load_only", False)),
    ).raise_for_differences()
