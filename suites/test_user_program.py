"""A program handed over as a file, as a user hands over their own ``.pte``:
``et.check_program(path, map)`` reads its methods and delegates from the program,
pushes it (content-cached), loads every method through every load path the agent
announces and checks every delegate's ``init`` exactly, the real XNNPACK delegate
through the agent's records.

Only the tests of the harness's own XNNPACK program need XnnpackBackend; ``--program``'s
test needs what the given program delegates to, and a device that cannot load it (an
MCU board has no file system for a program file; a delegate the device lacks) fails
it with the line ``et-harness send --program`` gives, never a skip."""

from __future__ import annotations

import pytest

from harness.runner import xnnpack_output, xnnpack_program

XNNPACK_BACKEND = "XnnpackBackend"

MAP_TEXT = """backends:
  ProbeA:
    - {key: threads, value: 4}
    - {key: fast, value: true}
  ProbeB:
    - {key: name, value: "ü"}
  XnnpackBackend:
    - {key: workspace_sharing_mode, value: 1}
    - {key: weight_cache_enabled, value: false}
"""


@pytest.fixture
def map_file(tmp_path):
    path = tmp_path / "map.yaml"
    path.write_text(MAP_TEXT, encoding="utf-8")
    return path


@pytest.mark.backend(XNNPACK_BACKEND)
def test_the_xnnpack_program_as_a_file(et, tmp_path):
    program = tmp_path / "model.pte"
    program.write_bytes(xnnpack_program().read_bytes())
    only_xnnpack = tmp_path / "xnnpack.yaml"
    only_xnnpack.write_text(
        "backends:\n  XnnpackBackend:\n    - {key: workspace_sharing_mode, value: 2}\n",
        encoding="utf-8",
    )
    checked = et.check_program(program, only_xnnpack)
    checked.raise_for_differences()
    assert [r.path for r in checked.results] == list(et.load_paths)
    for result in checked.results:
        (xnn,) = result.verdict.report.entries
        assert xnn.is_recorded and xnn.calls == 1 and xnn.executes == 1
        assert result.verdict.report.fact("outputs") == xnnpack_output()


@pytest.mark.backend(XNNPACK_BACKEND)
def test_a_multi_delegate_program_as_a_file(et, map_file):
    checked = et.check_program(
        xnnpack_program(("ProbeA", "ProbeB"), ("forward", "second")),
        map_file,
        probes=("ProbeA", "ProbeB"),
    )
    checked.raise_for_differences()
    assert checked.methods == ("forward", "second")
    assert len(checked.results) == 2 * len(et.load_paths)
    for result in checked.results:
        names = [(b.name, b.expected_options is not None) for b in result.verdict.backends]
        assert names == [("ProbeA", True), ("ProbeB", True), (XNNPACK_BACKEND, True)]


def test_your_program(et, users_program):
    """``pytest suites/test_user_program.py --device D --program model.pte --options
    map.yaml [--probe NAME]``: your program, every method on every load path, every
    delegate checked exactly against your map; options your backends will ignore are
    warnings (failures with ``--strict-options``)."""
    et.check_program(
        users_program.program, users_program.options, probes=users_program.probes
    ).raise_for_differences()
