"""What the controller (or the only process) reports: results, HTML, JUnit, terminal tables."""

from __future__ import annotations

import os
import sys

import pytest

from harness.results.directory import ResultsRecorder, describe_os_error
from harness.results.infra import one_line
from harness.results.junit import amend_junit
from harness.results.options_section import HEADING as OPTIONS_HEADING
from harness.results.options_section import options_lines
from harness.results.summary import (
    across_runtimes_lines,
    backend_table,
    device_runtime,
    devices_in_order,
    emulator_restarts,
    infrastructure_lines,
    outcome_table,
    quarantined_devices,
)

_INFRA_TITLE = "infrastructure errors (device trouble, not test failures)"


def _infra_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = crash.message if crash is not None else str(report.longrepr)
    return f"INFRA {report.nodeid} ({report.when}): {one_line(message)}"


def _write_infra(terminalreporter, lines: list[str]) -> None:
    if lines:
        terminalreporter.section(_INFRA_TITLE, yellow=True)
        for line in lines:
            terminalreporter.write_line(line)


class ControllerReporting:
    """The controller's (or only process's) hooks: results, HTML, JUnit, terminal tables."""

    def __init__(self, config: pytest.Config, recorder: ResultsRecorder) -> None:
        self.config = config
        self.recorder = recorder

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.recorder.add(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.recorder.finish(int(exitstatus))
        if self.recorder.unwritten and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the record is incomplete
        xmlpath = self.config.getoption("xmlpath", default=None)
        if xmlpath and self.recorder.active:
            path = self.config.invocation_params.dir / os.path.expanduser(
                os.path.expandvars(xmlpath)
            )
            if path.is_file():
                try:
                    amend_junit(path, self.recorder.results)
                except OSError as exc:
                    print(
                        f"et-harness: --junitxml {path}: cannot add the device facts "
                        f"({describe_os_error(exc)})",
                        file=sys.stderr,
                    )

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.recorder.active:  # no device: no tables, but an infra outcome is named
            stats = terminalreporter.stats.get("infra", [])
            _write_infra(terminalreporter, [_infra_line(report) for report in stats])
            return
        results = self.recorder.results
        for device in devices_in_order(results):
            lines = backend_table(results, device)
            if lines:
                terminalreporter.section(f"backend options delivery on {device}")
                runtime = device_runtime(results, device)
                if runtime:
                    terminalreporter.write_line(f"runtime: {runtime}")
                parts = device_runtime(results, device, "from_source")
                if parts:
                    terminalreporter.write_line(f"from source: {parts} (no real backend)")
                for lacking in (device_runtime(results, device, "lacks") or "").split(" | "):
                    if lacking:
                        terminalreporter.write_line(f"lacks: {lacking}", yellow=True)
                for line in lines:
                    terminalreporter.write_line(line)
        did = options_lines(results)
        if did:
            terminalreporter.section(OPTIONS_HEADING.lower())
            for line in did:
                terminalreporter.write_line(line, red=line.startswith("  failed"))
        _write_infra(terminalreporter, infrastructure_lines(results))
        across = across_runtimes_lines(results)
        if across:
            terminalreporter.section("across runtimes")
            for line in across:
                terminalreporter.write_line(line)
        terminalreporter.section("device farm")
        for line in outcome_table(results):
            terminalreporter.write_line(line)
        for device, reasons in emulator_restarts(results).items():
            for reason in reasons:
                terminalreporter.write_line(f"emulator restarted: {device}: {reason}", yellow=True)
        for device, reason in quarantined_devices(results).items():
            terminalreporter.write_line(f"quarantined: {device}: {reason}", yellow=True)
        terminalreporter.write_line(f"results: {self.recorder.results_dir}")
        unwritten = self.recorder.unwritten_line()
        if unwritten:
            terminalreporter.write_line(unwritten, red=True)
        terminalreporter.write_line(f"report:  {self.recorder.html_path}")
