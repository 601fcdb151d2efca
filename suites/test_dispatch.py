"""Each backend gets exactly its own options, through both paths."""

from __future__ import annotations

import pytest

from harness.options import BackendOptions, Option, OptionsMap

from .maps import PROBE_NAMES, distinct_map


@pytest.mark.parametrize("count", range(1, 9), ids=lambda n: f"{n}-backends")
def test_load_time_map_each_backend_gets_exactly_its_own(et, load_path, count):
    et.load(distinct_map(PROBE_NAMES[:count]), path=load_path).raise_for_differences()


@pytest.mark.parametrize("count", range(1, 9), ids=lambda n: f"{n}-backends")
def test_set_option_each_backend_gets_exactly_its_own(et, count):
    et.set(distinct_map(PROBE_NAMES[:count])).raise_for_differences()


def test_delegate_without_map_entry_gets_an_empty_span(et, load_path):
    options = distinct_map(("ProbeA", "ProbeC"))
    verdict = et.load(options, delegates=("ProbeA", "ProbeB", "ProbeC"), path=load_path)
    verdict.raise_for_differences()
    entry = verdict.report.entry("ProbeB")
    assert entry is not None and entry.calls == 1 and entry.options == ()


def test_map_entries_for_backends_absent_from_the_program_are_reported(et, load_path):
    options = distinct_map(("ProbeA", "ProbeB", "NotInProgram"))
    verdict = et.load(options, delegates=("ProbeA", "ProbeB"), path=load_path)
    verdict.raise_for_differences()
    assert verdict.ignored_backends == ("NotInProgram",)
    assert verdict.report.entry("NotInProgram") is None


def test_backend_called_twice_gets_its_options_at_each_init(et, load_path):
    verdict = et.load(
        distinct_map(("ProbeA", "ProbeB")), delegates=("ProbeA", "ProbeB", "ProbeA"), path=load_path
    )
    verdict.raise_for_differences()
    assert verdict.report.entry("ProbeA").calls == 2


def test_program_with_no_map_at_all(et, load_path):
    verdict = et.load(OptionsMap(), delegates=("ProbeA", "ProbeB"), path=load_path)
    verdict.raise_for_differences()
    assert all(e.options == () for e in verdict.report.entries)


def test_same_keys_different_values_stay_apart(et, load_path):
    options = OptionsMap(
        tuple(
            BackendOptions(name, (Option("level", i), Option("name", name)))
            for i, name in enumerate(PROBE_NAMES)
        )
    )
    et.load(options, path=load_path).raise_for_differences()
    et.set(options).raise_for_differences()
