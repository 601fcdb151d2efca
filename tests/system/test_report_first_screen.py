"""The HTML report's first screen is the answer, in headless Chromium: the verdict, the
test that failed, the option checks of each real backend and what differs across
runtimes; the probes' rows (a hundred in a run of the suites) folded below, unseen."""

from __future__ import annotations

import itertools
from pathlib import Path

from browser import chromium, first_screen
from prerequisites import require

from harness.results.html_report import write_report
from harness.results.records import CaseResult, VerdictRecord

REAL = ("XnnpackBackend", "QnnBackend")
PROBES = tuple(f"Probe{c}" for c in "ABCDEFGH") + tuple(f"Gen{n}" for n in range(10))
ROUTES = ("program", "module", "module_method", "module_both", "set", "get")
FACTS = {"abi": "x86_64", "agent_version": "0.1.0", "real_backends": ",".join(REAL)}


def _case(runtime: str, route: str, backend: str, ok: bool = True) -> CaseResult:
    action, path = (route, "") if route in ("set", "get") else ("load", route)
    verdict = VerdictRecord(
        action,
        ok,
        f"{action}: {'ok' if ok else '1 difference'}",
        () if ok else (f"{backend}: option threads: sent int 4, received int 5",),
        ((backend, ok),),
        path=path,
    )
    return CaseResult(
        f"suites/test_dispatch.py::test_each[host-{runtime}-{route}-{backend}]",
        "host",
        "passed" if ok else "failed",
        0.01,
        1.0,
        facts={**FACTS, "runtime": f"executorch {runtime}"},
        verdicts=(verdict,),
        runtime_label=runtime,
    )


def _run() -> list[CaseResult]:
    """A run across two runtimes: every probe and real backend on every route, exact,
    but XnnpackBackend via set on 1.5.1 (one failure, one check that differs)."""
    return [
        _case(runtime, route, backend, ok=(runtime, route, backend) != ("1.5.1", "set", REAL[0]))
        for runtime, route, backend in itertools.product(("1.5.0", "1.5.1"), ROUTES, REAL + PROBES)
    ]


def test_the_first_screen_is_the_verdict_and_shows_no_probe_row(tmp_path: Path) -> None:
    require("chromium")
    results = _run()
    page = tmp_path / "report.html"
    write_report(page, results, tmp_path)
    # Small: a passed case with exact verdicts is one line, a probe's row has no cell of its
    # own (about 370 bytes a case here; 840 before).
    assert page.stat().st_size < 500 * len(results)
    screen = first_screen(page, tmp_path)
    assert screen[0].startswith("p: Failed: 240 tests on 1 device(s) x 2 runtime(s)"), screen
    assert "239 passed, 1 failed. 1 not passed: why." in screen[0]
    headings = [line for line in screen if line.startswith("h2: ")]
    assert headings[:3] == [
        "h2: Not passed (1)",
        "h2: Backends: option checks per device",
        "h2: Across runtimes: 1 check(s) differ",
    ], screen
    failing = next(line for line in screen if line.startswith("li: failed"))
    assert "test_each[host-1.5.1-set-XnnpackBackend]" in failing
    assert "XnnpackBackend: option threads: sent int 4, received int 5" in failing
    backends = [line for line in screen if line.startswith("td: ") and "Backend" in line]
    assert backends[:2] == ["td: QnnBackend", "td: XnnpackBackend"], screen
    assert "td: 5/6 exact, 1 wrongprogram 1/1 · module 1/1" in " ".join(screen)  # on 1.5.1
    # No probe's row, anywhere on the first screen: they are all in a closed <details>.
    assert not [line for line in screen if any(p in line for p in PROBES)], screen
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    folded = dom.split('<details class="probes">', 1)[1].split("</details>", 1)[0]
    assert folded.count('<td class="backend">') == len(PROBES) * len(ROUTES)
    assert "<summary>" in folded and "108 rows of 18 backends" in folded
    # The screenshot of that first screen: the window, not the page (which is longer).
    shot = tmp_path / "first-screen.png"
    chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1200,900")
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1200, 900)
