"""A failure's report sections carry the agent's own stderr lines, not the runtime's log:
ExecuTorch's ``E 00:00:00.027 executorch:file.cpp:12] ...`` lines (XNNPACK writes the
same few in every failure) are kept whole as an artifact the section names.

Runs pytest (pytester, in a subprocess) on the host device with the real agent: a probe
program delegating to the real XnnpackBackend makes the runtime log its refusal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from host_pytest import run_on_host

pytest_plugins = ["pytester"]

CASE = """
from harness.options import OptionsMap


def test_fails_after_a_logged_load(et):
    options = OptionsMap.from_dict({"XnnpackBackend": {"weight_cache_enabled": True}, "ProbeA": {}})
    et.load(options, delegates=("XnnpackBackend", "ProbeA")).ignore_differences()
    assert False, "seeded"
"""
_LOGGED = "executorch:method.cpp"  # "Init failed for backend XnnpackBackend"


@pytest.mark.slow
def test_runtime_log_lines_go_to_the_artifacts_not_the_failure_section(
    pytester, request, monkeypatch
):
    run = run_on_host(pytester, request, monkeypatch, test_case=CASE)
    results = pytester.path / "results"
    run.assert_outcomes(failed=1)
    text = run.stdout.str()
    section = text.split("agent stderr on host", 1)[1].split("=====", 1)[0]
    assert "et-agent " in section and _LOGGED not in text, section
    (kept,) = (results / "artifacts" / "host").glob("*/try-1/agent-stderr.txt")
    assert f"runtime log line(s) left out: {kept}" in section
    assert _LOGGED in kept.read_text("utf-8") and "et-agent " in kept.read_text("utf-8")
    (result,) = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    assert not any(_LOGGED in body for _, body in result["sections"])
    assert str(kept.relative_to(results)) in result["artifacts"]
    assert Path(results / result["artifacts"][0]).is_file()
