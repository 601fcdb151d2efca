"""The report's "what the options did" (harness/results/options_section.py): a pytest run
whose tests check a program with real options, one under a backend that ignores
packed_cache_path; per backend and option, delivered, outputs unchanged and effect
observed, in results.jsonl, the terminal summary and the HTML report (headless Chromium),
with a link to the failing case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import chromium, first_screen
from host_pytest import run_on_host
from prerequisites import require
from test_fault_injection import fault_profile, shim  # noqa: F401  (the fixture)

from harness.untrusted.trust import TRUSTED_PROFILES_ENV

pytest_plugins = ["pytester"]
PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "xnnpack.pte"
CASES = f"""
PROGRAM = {str(PROGRAM)!r}
MAP = "backends:\\n  XnnpackBackend:\\n    - {{key: weight_cache_enabled, value: true}}\\n"


def test_cache_file(et, tmp_path):
    options = tmp_path / "map.yaml"
    cache = tmp_path / "packed.bin"
    options.write_text(MAP + f"    - {{{{key: packed_cache_path, value: '{{cache}}'}}}}\\n")
    et.check_program(PROGRAM, str(options)).raise_for_differences()


def test_weight_cache(et, tmp_path):
    options = tmp_path / "map.yaml"
    options.write_text(MAP)
    et.check_program(PROGRAM, str(options)).raise_for_differences()
"""


def test_what_the_options_did_is_in_the_records_the_summary_and_the_report(
    shim: Path,  # noqa: F811
    tmp_path: Path,
    pytester: pytest.Pytester,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require("chromium")
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(tmp_path))
    device = str(fault_profile(shim, "real_ignores_cache_path", tmp_path))
    run = run_on_host(pytester, request, monkeypatch, device=device, test_options=CASES)
    run.assert_outcomes(passed=1, failed=1)
    out = run.stdout.str()
    assert "left no file at its path (a set that changed nothing)" in out
    summary = out.split("what the options did", 1)[1].splitlines()
    assert summary[1:4] == [
        "XnnpackBackend weight_cache_enabled (result-invariant): delivered ✓, outputs "
        "unchanged ✓, effect observed -",
        "XnnpackBackend packed_cache_path (a file at its path, with weight_cache_enabled=True): "
        "delivered ✓, outputs unchanged ✓, effect observed ✗",
        "  failed: test_options.py::test_cache_file[host-real-ignores-cache-path] on "
        "host-real-ignores-cache-path",
    ], summary
    results = pytester.path / "results"
    records = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    failing = next(r for r in records if "test_cache_file" in r["nodeid"])
    assert [(o["key"], o["observed"]) for o in failing["options"]] == [
        ("weight_cache_enabled", None),
        ("packed_cache_path", False),
    ]
    page = results / "report.html"
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    section = dom.split('<h2 id="options">What the options did</h2>', 1)[1].split("</table>")[0]
    rows = section.split('<tr class="option">')[1:]
    assert len(rows) == 2
    assert '<td class="skipped">-</td>' in rows[0] and "failed" not in rows[0]
    assert (
        '<td class="failed">✗</td>' in rows[1]
        and "test_cache_file[host-real-ignores-cache-path]</a>" in rows[1]
    )
    link = rows[1].split('<a href="#', 1)[1].split('"', 1)[0]
    assert f'id="{link}"' in dom.split(section, 1)[1]  # the failing case's details
    screen = first_screen(page, tmp_path)
    assert "h2: What the options did" in screen, screen
