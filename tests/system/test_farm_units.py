"""The device-farm modules on their own: selection, locks, health, records, reports, merge."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import pytest
import yaml
from browser import chromium
from prerequisites import require
from test_farm_runs import child

from harness.channel.stream_channel import StreamChannel
from harness.check import Verdict, check_set
from harness.data.messages import ENTRY_FLAG_PROBE, Action, Outcome, Report, ReportEntry, Request
from harness.data.options import Option, OptionsMap
from harness.devices.core_files import collect_core_files
from harness.errors import InfrastructureError
from harness.farm.deadline import RunDeadline, RunTimeExpired
from harness.farm.device_health import DeviceHealth, DeviceQuarantined
from harness.farm.distribution import DistributionError, check_distribution_mode, device_of_nodeid
from harness.farm.lock import DeviceBusy, DeviceLock
from harness.farm.selection import DeviceSelectionError, select_profiles
from harness.profiles.device_profile import DeviceProfile, parse_profile
from harness.results.artifacts import CrashArtifacts
from harness.results.directory import ResultsFileError, ResultsWriter, read_results
from harness.results.html_report import render_report, write_report
from harness.results.infra import infrastructure_error
from harness.results.junit import amend_junit
from harness.results.merge import main as merge_main
from harness.results.records import CaseResult, InfraRecord, VerdictRecord
from harness.results.summary import (
    backend_table,
    device_runtime,
    infrastructure_lines,
    outcome_table,
    quarantined_devices,
)
from harness.runner import CaseRunner, SessionBroken
from harness.session.agent_session import AgentSession
from harness.transport.base import ByteStream, TransportLost, TransportTimeout
from harness.transport.local import LocalTransport

# ---- selection -------------------------------------------------------------------------------


def _profiles_dir(tmp_path: Path, specs: dict[str, list[str]]) -> Path:
    devices = tmp_path / "devices"
    devices.mkdir()
    for name, tags in specs.items():
        (devices / f"{name}.yaml").write_text(
            yaml.safe_dump({"transport": {"kind": "local"}, "tags": tags}), "utf-8"
        )
    return devices


def test_selection_by_names_all_tags_and_paths(tmp_path):
    devices = _profiles_dir(tmp_path, {"a": ["lab"], "b": ["lab", "arm"], "c": []})

    def names(spec: str) -> list[str]:
        return [p.name for p in select_profiles(spec, devices)]

    assert names("b,a") == ["b", "a"]
    assert names("all") == ["a", "b", "c"]
    assert names("tag:lab") == ["a", "b"]
    assert names("tag:arm, a ,b") == ["b", "a"]  # each device once, in first-named order
    assert names(str(devices / "c.yaml")) == ["c"]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nope", "unknown device 'nope'.*known devices: a, b"),
        ("tag:gpu", "no profile in .* has tag 'gpu'; tags there: lab"),
        (" , ", "--device is empty"),
    ],
)
def test_selection_errors_say_what_exists(tmp_path, spec, message):
    devices = _profiles_dir(tmp_path, {"a": ["lab"], "b": []})
    with pytest.raises(DeviceSelectionError, match=message):
        select_profiles(spec, devices)


@pytest.mark.parametrize("spec", ["host", "all", "tag:lab"])
def test_a_devices_dir_that_is_not_there_is_named(tmp_path, spec):
    with pytest.raises(DeviceSelectionError, match=r"^--devices-dir .*/nope: no such directory"):
        select_profiles(spec, tmp_path / "nope")


def test_known_devices_are_listed_by_name(tmp_path):
    """By name, as ``et-harness`` lists them: ``host`` before ``host-tsan``, although
    ``host-tsan.yaml`` sorts before ``host.yaml``."""
    devices = _profiles_dir(tmp_path, {"host": [], "host-tsan": [], "adb-emu": []})
    with pytest.raises(DeviceSelectionError, match="known devices: adb-emu, host, host-tsan "):
        select_profiles("hots", devices)


def test_two_profiles_with_one_name_are_refused(tmp_path):
    devices = _profiles_dir(tmp_path, {"a": []})
    other = tmp_path / "other.yaml"
    other.write_text("name: a\ntransport: {kind: local}\n", "utf-8")
    with pytest.raises(DeviceSelectionError, match="two profiles are named 'a'"):
        select_profiles(f"a,{other}", devices)


# ---- distribution ----------------------------------------------------------------------------


def test_device_of_nodeid_takes_the_longest_device_name():
    devices = ("host", "host-a")
    assert device_of_nodeid("t.py::test_x[host-a-2-backends]", devices) == "host-a"
    assert device_of_nodeid("t.py::test_x[host-2-backends]", devices) == "host"
    assert device_of_nodeid("t.py::test_x[host]", devices) == "host"
    assert device_of_nodeid("t.py::test_x[other-1]", devices) is None
    assert device_of_nodeid("t.py::test_plain", devices) is None


def test_modes_that_split_devices_are_refused_for_device_runs():
    for mode in ("no", "load", "loadgroup"):
        check_distribution_mode(mode, device_run=True)
    check_distribution_mode("loadfile", device_run=False)
    with pytest.raises(DistributionError, match="--dist loadfile would split"):
        check_distribution_mode("loadfile", device_run=True)


# ---- lock ------------------------------------------------------------------------------------


def test_a_held_device_is_busy_and_the_message_names_the_holder(tmp_path):
    first, second = DeviceLock("dev/1", tmp_path), DeviceLock("dev/1", tmp_path)
    first.acquire(timeout=1)
    assert first.path.name.startswith("dev_1-") and first.path.suffix == ".lock"
    holder = second.holder()
    assert holder is not None and holder.pid == __import__("os").getpid()
    started = time.monotonic()
    with pytest.raises(DeviceBusy, match=r"in use by pid \d+ on .*command: .*waiting 0\.2 s"):
        second.acquire(timeout=0.2)
    assert time.monotonic() - started < 2
    first.release()
    assert second.holder() is None  # the note goes with the lock
    second.acquire(timeout=0)
    second.release()


# ---- health, deadline, what is infrastructure -------------------------------------------------


def test_health_asks_for_a_check_after_k_consecutive_infrastructure_errors():
    health = DeviceHealth("dev", quarantine_after=2)
    health.test_ended(infrastructure_error=True)
    health.test_ended(infrastructure_error=False)  # a verdict in between resets the count
    health.test_ended(infrastructure_error=True)
    assert not health.needs_check
    health.test_ended(infrastructure_error=True)
    assert health.needs_check
    health.quarantine("HELLO timed out")
    health.quarantine("a later reason")
    assert not health.needs_check
    with pytest.raises(DeviceQuarantined, match=r"'dev' is quarantined .*: HELLO timed out"):
        health.ensure_usable()


def test_deadline_bounds_waits_and_expires():
    assert RunDeadline().remaining() is None
    assert RunDeadline().bound(5) == 5
    RunDeadline.starting_now(60).check()
    assert RunDeadline.starting_now(60).bound(600) <= 60
    expired = RunDeadline(time.time() - 1, 10)
    with pytest.raises(RunTimeExpired, match="--run-timeout 10 s"):
        expired.check()


def test_infrastructure_errors_are_transport_and_farm_errors_and_groups_of_them():
    lost, late = TransportLost("gone"), TransportTimeout("late")
    assert infrastructure_error(lost) is lost
    assert infrastructure_error(RunTimeExpired("up")) is not None
    assert isinstance(RunTimeExpired("up"), InfrastructureError)
    assert infrastructure_error(ExceptionGroup("flaky", [lost, late])) is lost
    assert infrastructure_error(ExceptionGroup("mixed", [lost, ValueError()])) is None
    assert infrastructure_error(AssertionError("wrong option")) is None


_E = TypeVar("_E", bound=BaseException)


def _raised(exc: _E, cause: BaseException | None = None) -> _E:
    """``exc`` as ``raise exc from cause`` leaves it."""
    exc.__cause__ = cause
    return exc


def test_infrastructure_errors_are_found_inside_what_hypothesis_raises():
    from hypothesis.errors import Flaky, FlakyFailure

    late = _raised(TransportTimeout("late"))
    refused = _raised(SessionBroken("not sent"), late)
    assert infrastructure_error(refused) is late  # stands for the error that broke the link
    assert infrastructure_error(FlakyFailure("inconsistent", [refused])) is late
    assert infrastructure_error(ExceptionGroup("2 distinct", [late, refused])) is late
    assert infrastructure_error(_raised(Flaky("unreliable"), late)) is late
    # A test's own failure stays one, even when it happened while handling device trouble.
    assert infrastructure_error(_raised(AssertionError("wrong"), late)) is None
    assert infrastructure_error(FlakyFailure("inconsistent", [AssertionError()])) is None


# ---- the agent link after device trouble -----------------------------------------------------


class _SilentAfter:
    """An agent link that answers ``answers`` requests, then times out, counting requests."""

    def __init__(self, answers: int) -> None:
        self.answers = answers
        self.requests = 0

    def request(self, request: Request) -> Report:
        self.requests += 1
        if self.requests > self.answers:
            raise TransportTimeout("no answer within 3.0 s")
        return Report(request.action, Outcome.OK)

    def send_raw(self, frame: bytes, seq: int | None = None) -> Report:
        raise AssertionError("not used")

    # The rest of an Session, which the runner does not use.
    def next_seq(self) -> int:
        raise AssertionError("not used")

    def pipeline(self, requests: Sequence[Request], window: int = 8) -> list[Report]:
        raise AssertionError("not used")

    def exchange(self, frame: bytes) -> bytes:
        raise AssertionError("not used")

    def decode(self, data: bytes, seq: int) -> Report:
        raise AssertionError("not used")

    def stderr_tail(self) -> str:
        raise AssertionError("not used")

    def close(self) -> None:
        pass


def test_after_device_trouble_nothing_more_is_sent_until_the_agent_restarts():
    links: list[_SilentAfter] = []

    def start() -> _SilentAfter:
        links.append(_SilentAfter(answers=2))  # HELLO and one more
        return links[-1]

    runner = CaseRunner(start, lambda delegates: "")
    runner.reset()
    with pytest.raises(TransportTimeout):
        runner.reset()
    for _ in range(50):  # e.g. Hypothesis's further examples
        with pytest.raises(SessionBroken) as refused:
            runner.send(Request(Action.GET))
        assert isinstance(refused.value.__cause__, TransportTimeout)
    with pytest.raises(SessionBroken):
        runner.reset()  # e.g. once per Hypothesis example: still nothing sent
    assert [link.requests for link in links] == [3]
    assert runner.broken
    runner.restart()  # the test's retry, or the next test
    assert not runner.broken
    runner.reset()
    assert [link.requests for link in links] == [3, 2]


def test_no_request_is_sent_once_the_runs_time_is_up():
    link = _SilentAfter(answers=100)
    deadline = RunDeadline(time.time() - 1, 5)
    runner = CaseRunner(lambda: link, lambda delegates: "", time_limit=deadline)
    with pytest.raises(RunTimeExpired):
        runner.send(Request(Action.GET))
    assert link.requests == 0


class _StalledStream(ByteStream):
    def __init__(self) -> None:
        self.timeouts: list[float] = []
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += 1

    def read_exact(self, size: int, timeout: float) -> bytes:
        self.timeouts.append(timeout)
        raise TransportTimeout(f"no answer within {timeout:.1f} s")

    def close(self) -> None:
        pass


def test_a_session_waits_no_longer_than_the_runs_deadline_and_says_so():
    stream = _StalledStream()
    session = AgentSession(
        StreamChannel(stream, timeout=60, time_limit=RunDeadline(time.time() + 0.2, 5))
    )
    with pytest.raises(TransportTimeout):  # the device's timeout, the run still has time
        session.request(Request(Action.HELLO))
    assert stream.timeouts[0] <= 0.2
    ended = AgentSession(
        StreamChannel(stream, timeout=60, time_limit=RunDeadline(time.time() - 1, 5))
    )
    with pytest.raises(RunTimeExpired, match="--run-timeout 5 s"):  # not the device's fault
        ended.request(Request(Action.HELLO))
    assert stream.timeouts[-1] == 0
    plain = AgentSession(StreamChannel(stream, timeout=7))
    with pytest.raises(TransportTimeout):
        plain.request(Request(Action.HELLO))
    assert stream.timeouts[-1] == 7


# ---- artifacts -------------------------------------------------------------------------------


def test_core_files_are_pulled_and_removed_from_the_device(tmp_path):
    work = tmp_path / "device"
    work.mkdir()
    (work / "core").write_bytes(b"\x7fELF core")
    (work / "core.4242").write_bytes(b"\x7fELF core 2")
    (work / "corefile.txt").write_text("not a core", "utf-8")
    (work / "agent").mkdir()
    pulled = collect_core_files(LocalTransport(str(work)), str(work), tmp_path / "out", 10)
    assert sorted(p.name for p in pulled) == ["core", "core.4242"]
    assert (tmp_path / "out" / "core").read_bytes() == b"\x7fELF core"
    assert sorted(p.name for p in work.iterdir()) == ["agent", "corefile.txt"]
    assert collect_core_files(LocalTransport(str(work)), str(work), tmp_path / "out", 10) == []


def test_each_try_that_lost_its_agent_keeps_its_cores_apart(tmp_path):
    work = tmp_path / "device"
    work.mkdir()
    results = tmp_path / "results"
    transport = LocalTransport(str(work))

    def collect(dest: Path) -> list[Path]:
        return collect_core_files(transport, str(work), dest, 10)

    def crash(content: bytes) -> None:
        (work / "core").write_bytes(content)

    artifacts = CrashArtifacts(results, "dev", "test_x[dev-1]")
    crash(b"first")
    first = _raised(TransportLost("gone"))
    artifacts.after_failure(first, 1, collect)
    artifacts.after_failure(first, 1, collect)  # the same loss seen by another hook
    crash(b"second")
    wrapped = ExceptionGroup("hypothesis", [_raised(SessionBroken("not sent"), first)])
    artifacts.after_failure(
        ExceptionGroup("flaky", [wrapped, _raised(TransportLost("x"))]), 2, collect
    )
    crash(b"not a loss")
    artifacts.after_failure(_raised(TransportTimeout("late")), 3, collect)
    assert artifacts.paths == [
        "artifacts/dev/test_x_dev-1_/try-1/core",
        "artifacts/dev/test_x_dev-1_/try-2/core",
    ]
    assert [(results / p).read_bytes() for p in artifacts.paths] == [b"first", b"second"]
    again = CrashArtifacts(results, "dev", "test_x[dev-1]")  # the results directory reused
    again.after_failure(_raised(TransportLost("gone")), 1, collect)
    assert again.paths == ["artifacts/dev/test_x_dev-1_/try-1-2/core"]
    assert (results / again.paths[0]).read_bytes() == b"not a loss"


# ---- results, summaries, reports --------------------------------------------------------------


def _wrong_value_verdict() -> Verdict:
    sent = OptionsMap.from_dict({"ProbeA": {"threads": 4, "mode": "fast"}})
    report = Report(
        Action.SET,
        Outcome.OK,
        entries=(
            ReportEntry(
                "ProbeA",
                0,
                calls=1,
                flags=ENTRY_FLAG_PROBE,
                options=(Option("threads", 5), Option("mode", "fast")),
            ),
        ),
    )
    verdict = check_set(sent, report)
    assert not verdict.ok
    return verdict


def _results() -> list[CaseResult]:
    bad = VerdictRecord.of(_wrong_value_verdict())
    good = VerdictRecord("set", True, "set: ok, 1 backend as expected", (), (("ProbeA", True),))
    facts = {"abi": "x86_64", "runtime": "executorch 1.5.1", "agent_version": "0.1.0"}
    return [
        CaseResult(
            "suites/test_a.py::test_x[alpha-1]",
            "alpha",
            "passed",
            0.1,
            1.0,
            facts=facts,
            verdicts=(good,),
        ),
        CaseResult(
            "suites/test_a.py::test_x[alpha-2]",
            "alpha",
            "failed",
            0.1,
            2.0,
            facts=facts,
            verdicts=(bad,),
            longrepr="DeliveryMismatch: <b>diff</b>",
        ),
        CaseResult(
            "suites/test_a.py::test_x[beta-1]",
            "beta",
            "passed",
            0.1,
            1.0,
            verdicts=(good,),
            failed_tries=("TransportLost: gone",),
        ),
        CaseResult(
            "suites/test_a.py::test_x[beta-2]",
            "beta",
            "infra",
            0.0,
            2.0,
            infra=InfraRecord("DeviceQuarantined", "device 'beta' is quarantined: x", "setup"),
        ),
        CaseResult("suites/test_b.py::test_plain", None, "passed", 0.0, 3.0),
    ]


def test_results_round_trip_and_a_cut_short_last_line_is_skipped(tmp_path):
    path = tmp_path / "results.jsonl"
    writer = ResultsWriter(path)
    for result in _results():
        writer.write(result)
    writer.close()
    assert read_results(path) == _results()
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"nodeid": "suites/test_a.py::cut')
    assert read_results(path) == _results()
    lines = path.read_text("utf-8").splitlines()
    path.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n", "utf-8")
    with pytest.raises(ResultsFileError, match=r"results.jsonl:2: not a test result"):
        read_results(path)


def test_terminal_tables_count_outcomes_per_device_and_backend():
    table = outcome_table(_results())
    assert table[0].split() == ["device", "passed", "failed", "infra", "retried"]
    assert table[1].split() == ["alpha", "1", "1", "0", "0"]
    assert table[2].split() == ["beta", "1", "0", "1", "1"]
    assert table[3].split() == ["(no", "device)", "1", "0", "0", "0"]
    assert table[4].split() == ["total", "3", "1", "1", "1"]
    assert quarantined_devices(_results()) == {"beta": "device 'beta' is quarantined: x"}
    lost = CaseResult(
        "t.py::test_y[beta-0]",
        "beta",
        "infra",
        0.1,
        0.5,
        infra=InfraRecord("TransportLost", "gone;\nstderr:\nboom", "call"),
    )
    assert infrastructure_lines([lost, *_results()]) == [
        "INFRA t.py::test_y[beta-0] (call): TransportLost: gone; stderr: boom",
        "INFRA 1 test(s) on beta not started: the device is quarantined",
    ]
    assert backend_table(_results(), "alpha") == [
        "backend  checks  exact  wrong    set",
        "ProbeA        2      1      1    1/2",
        "2 verdicts, 1 exact, 1 with differences",
    ]
    assert device_runtime(_results(), "alpha") == "executorch 1.5.1"
    assert device_runtime(_results(), "beta") is None


def test_differences_the_tests_expected_are_counted_apart():
    """A passing run's summary must not read as a failing one: a test that checks a
    refusal passes on its verdict's differences, and so does an xfailed test."""
    bad = VerdictRecord.of(_wrong_value_verdict())
    results = [
        CaseResult(
            "suites/t.py::test_refused[alpha]", "alpha", "passed", 0.1, 1.0, verdicts=(bad,)
        ),
        CaseResult(
            "suites/t.py::test_known_bug[alpha]", "alpha", "xfailed", 0.1, 1.0, verdicts=(bad,)
        ),
        CaseResult("suites/t.py::test_x[alpha]", "alpha", "failed", 0.1, 1.0, verdicts=(bad,)),
    ]
    assert backend_table(results, "alpha")[-1] == (
        "3 verdicts, 0 exact, 3 with differences (2 expected by tests that passed or xfailed)"
    )
    assert backend_table(results[2:], "alpha")[-1] == "1 verdicts, 0 exact, 1 with differences"


def _load_record(path: str, ok: bool) -> VerdictRecord:
    return VerdictRecord(
        "load", ok, f"load [{path}]: ...", (), (("ProbeA", ok), ("XnnpackBackend", True)), path=path
    )


def test_tables_and_junit_show_load_path_by_backend_per_device(tmp_path):
    facts = {"abi": "x86_64", "load_paths": "program,module", "real_backends": "XnnpackBackend"}
    results = [
        CaseResult(
            "suites/test_a.py::test_l[alpha-program]",
            "alpha",
            "passed",
            0.1,
            1.0,
            facts=facts,
            verdicts=(_load_record("program", True),),
        ),
        CaseResult(
            "suites/test_a.py::test_l[alpha-module]",
            "alpha",
            "failed",
            0.1,
            1.0,
            facts=facts,
            verdicts=(_load_record("module", False),),
        ),
        *_results(),
    ]
    assert backend_table(results, "alpha") == [
        "backend         checks  exact  wrong  program  module    set",
        "ProbeA               4      2      2      1/1     0/1    1/2",
        "XnnpackBackend       2      2      0      1/1     1/1      -",
        "4 verdicts, 2 exact, 2 with differences",
    ]
    page = render_report(results, "paths")
    # The matrix has the real backend's rows, each with its cell; the probe's are folded
    # below it, rows with differences first (module 0/1, set 1/2), then the rest (among
    # equals the routes keep their order), linking to their suite's cell.
    matrix, probes = page.split('<h2 id="probes">', 1)
    assert 'XnnpackBackend <span class="muted">via module</span>' in matrix
    assert "ProbeA" not in matrix.split("<h2>Matrix", 1)[1]
    assert probes.index("via module") < probes.index("via set") < probes.index("via program")
    assert "<h3>XnnpackBackend via module in suites/test_a.py on alpha</h3>" in page
    assert "<h3>ProbeA via" not in page
    record = VerdictRecord.from_dict(dataclasses.asdict(results[1].verdicts[0]))
    assert (record.path, record.route) == ("module", "module")
    path = tmp_path / "junit.xml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="p" '
        'errors="0" failures="0" skipped="0" tests="0"/></testsuites>',
        "utf-8",
    )
    amend_junit(path, results)
    props = {
        p.get("name"): p.get("value")
        for p in child(child(ET.parse(path).getroot(), "testsuite"), "properties")
    }
    assert props["device.alpha.load_paths"] == "program,module"
    assert props["device.alpha.real_backends"] == "XnnpackBackend"
    assert props["device.alpha.paths_served"] == "program,module"
    assert "device.beta.paths_served" not in props


def test_html_report_has_the_matrix_links_and_the_rendered_diff(tmp_path):
    page = render_report(_results(), "nightly")
    assert page.startswith("<!DOCTYPE html>") and "nightly" in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")
    assert "<th>alpha</th><th>beta</th><th>(no device)</th>" in page
    # suite row; each cell links to its list of cases; the probe's row (folded below the
    # matrix: the devices announce no real backend) links to its suite's cell
    assert '<a href="#s0d0">✓1 ✗1</a>' in page
    assert '<a href="#s0d1">✓1 I1</a>' in page
    assert '<td class="failed num"><a href="#s0d0">1/2</a>' in page
    assert 'id="s0d0"' in page and 'href="#c1"' in page and 'id="c1"' in page
    assert "ProbeA: option threads: sent int 4, received int 5" in page  # the differences
    assert "[0] threads: int 4         [0] threads: int 5         &lt;- WRONG_VALUE" in page
    assert "DeliveryMismatch: &lt;b&gt;diff&lt;/b&gt;" in page  # escaped
    assert "device &#x27;beta&#x27; is quarantined: x" in page
    write_report(tmp_path / "sub" / "report.html", _results(), tmp_path)
    assert (tmp_path / "sub" / "report.html").read_text("utf-8").count('class="case"') == 5


def test_html_report_renders_in_a_real_browser(tmp_path):
    require("chromium")
    report = tmp_path / "report.html"
    write_report(report, _results(), tmp_path)
    shot = tmp_path / "shot.png"
    chromium(report, tmp_path, f"--screenshot={shot}", "--window-size=1200,900")
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1200, 900)
    dom = chromium(report, tmp_path, "--dump-dom").stdout
    assert 'id="s0d0"' in dom and "[0] threads: int 4 " in dom


def test_junit_infrastructure_failures_become_typed_errors_with_device_properties(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
        'failures="2" skipped="0" tests="2"><testcase classname="t" name="test_x[beta-1]">'
        '<properties><property name="device" value="beta"/>'
        '<property name="infrastructure_error" value="TransportLost: host: gone"/>'
        '<property name="infrastructure_phase" value="call"/></properties>'
        '<failure message="TransportLost: host: gone">trace</failure></testcase>'
        '<testcase classname="t" name="test_x[alpha-1]"><failure message="assert">t</failure>'
        "</testcase></testsuite></testsuites>",
        "utf-8",
    )
    amend_junit(path, _results())
    suite = child(ET.parse(path).getroot(), "testsuite")
    assert (suite.get("failures"), suite.get("errors")) == ("1", "1")
    infra, real = suite.findall("testcase")
    assert infra.find("failure") is None
    assert child(infra, "error").attrib == {"message": "host: gone", "type": "TransportLost"}
    assert real.find("failure") is not None
    props = {p.get("name"): p.get("value") for p in child(suite, "properties")}
    assert props["devices"] == "alpha,beta"
    assert props["device.alpha.runtime"] == "executorch 1.5.1"


def test_merge_combines_runs_into_one_results_file_and_report(tmp_path, capsys):
    results = _results()
    for run, chunk in (("run-alpha", results[:2]), ("run-beta", results[2:])):
        writer = ResultsWriter(tmp_path / "downloads" / run / "results.jsonl")
        for result in chunk:
            writer.write(result)
        writer.close()
    out = tmp_path / "merged"
    assert merge_main([str(out), str(tmp_path / "downloads")]) == 0
    merged = read_results(out / "results.jsonl")
    assert [r.nodeid for r in merged] == [r.nodeid for r in results]
    assert {r.run for r in merged} == {"run-alpha", "run-beta"}
    page = (out / "report.html").read_text("utf-8")
    assert "<th>alpha</th><th>beta</th>" in page and "run-alpha" in page
    printed = capsys.readouterr().out
    assert "total" in printed and "quarantined: beta" in printed
    assert merge_main([str(tmp_path / "empty-out"), str(tmp_path / "merged" / "nothing")]) == 2
    (tmp_path / "none").mkdir()
    assert merge_main([str(tmp_path / "empty-out"), str(tmp_path / "none")]) == 2


def test_merge_runs_as_a_module(tmp_path):
    writer = ResultsWriter(tmp_path / "in" / "results.jsonl")
    writer.write(_results()[0])
    writer.close()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.results.merge",
            str(tmp_path / "out"),
            str(tmp_path / "in"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "results.jsonl").read_text("utf-8"))["device"] == "alpha"


# ---- CI ----------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def test_nightly_workflow_runs_every_device_and_merges_the_results():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "nightly.yml").read_text("utf-8"))
    jobs = workflow["jobs"]
    assert set(jobs) == {"emulated", "source-history", "program-zoo", "chaos", "lab", "report"}
    assert jobs["lab"]["uses"] == "$/.github/workflows/lab-nightly.yml"  # the team's nightly
    assert jobs["lab"]["with"]["report"] is False  # merged below, with the other jobs
    pools = yaml.safe_load((REPO / ".github" / "workflows" / "lab-nightly.yml").read_text())
    assert pools["jobs"]["lab"]["runs-on"] == ["self-hosted", "et-lab"]  # generic runners
    assert jobs["report"]["needs"] == ["emulated", "lab"] and jobs["report"]["if"] == "always()"
    steps = [
        s.get("run", "") + str(s.get("with", "")) for j in jobs.values() for s in j.get("steps", [])
    ]
    assert any("bash ci/nightly-report.sh all-results merged" in s for s in steps)
    uploads = [
        s
        for j in jobs.values()
        for s in j.get("steps", [])
        if "upload-artifact" in str(s.get("uses"))
    ]
    assert len(uploads) == 5
    history_sweep = [s["run"] for s in jobs["source-history"]["steps"] if "run" in s]
    assert any(
        "tests/system/test_source_history.py" in s and "-m nightly" in s for s in history_sweep
    ), history_sweep
    script = REPO / "ci" / "run-emulated.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    assert "--device tag:emulated -n" in script.read_text("utf-8")


def test_two_profiles_for_one_board_share_one_lock(tmp_path):
    from harness.farm.lock import device_key

    def profile(name: str, transport: dict[str, str], emulator: str | None = None) -> DeviceProfile:
        data: dict[str, object] = {"name": name, "transport": transport}
        if emulator:
            data["emulator"] = emulator
        return parse_profile(data, None, name)

    rpi = profile("rpi5", {"kind": "ssh", "host": "rpi5.lab", "user": "et"})
    copy = profile("rpi5-nightly", {"kind": "ssh", "host": "rpi5.lab", "user": "et"})
    other = profile("rpi4", {"kind": "ssh", "host": "rpi4.lab", "user": "et"})
    assert device_key(rpi) == device_key(copy) != device_key(other)
    board = profile("nucleo", {"kind": "serial", "port": "/dev/ttyACM0"})
    again = profile("nucleo-debug", {"kind": "serial", "port": "/dev/ttyACM0"})
    assert device_key(board) == device_key(again)
    emulated = profile("ssh-emu", {"kind": "ssh"}, emulator="ssh-emu")
    assert device_key(emulated) != device_key(profile("ssh-emu-2", {"kind": "ssh"}, "ssh-emu"))

    first = DeviceLock("rpi5", tmp_path, device_key(rpi))
    second = DeviceLock("rpi5-nightly", tmp_path, device_key(copy))
    assert first.path == second.path != DeviceLock("rpi4", tmp_path, device_key(other)).path
    first.acquire(timeout=1)
    try:
        with pytest.raises(DeviceBusy, match="rpi5-nightly"):
            second.acquire(timeout=0.2)
    finally:
        first.release()


def test_a_report_that_cannot_be_written_at_the_end_leaves_complete_results(tmp_path, capsys):
    from harness.results.directory import ResultsRecorder, RunInfo

    results_dir = tmp_path / "results"
    (tmp_path / "blocker").write_text("")  # a file where the report's directory should be
    gone = tmp_path / "blocker" / "report.html"
    recorder = ResultsRecorder(
        results_dir, RunInfo.starting("r", ("-q",), ("host",)), html_path=gone, eager=True
    )
    recorder.finish(0)
    assert json.loads((results_dir / "run.json").read_text())["exit_status"] == 0
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith(f"et-harness: --html-report {gone}: "), said


@pytest.mark.parametrize(
    "policy, message",
    [
        ({"lock_timeout": float("nan")}, "--lock-timeout must be >= 0 seconds; got nan"),
        ({"lock_timeout": float("inf")}, "--lock-timeout must be >= 0 seconds; got inf"),
        ({"deadline": RunDeadline.starting_now(-5)}, "--run-timeout must be > 0 seconds; got -5"),
        ({"deadline": RunDeadline.starting_now(0)}, "--run-timeout must be > 0 seconds; got 0"),
        ({"deadline": RunDeadline.starting_now(float("nan"))}, "--run-timeout must be > 0 seconds"),
    ],
)
def test_time_options_that_would_wait_forever_or_end_every_test_are_refused(policy, message):
    """nan or inf waited forever for a busy device; 0, -5 or nan made every test infra."""
    from harness.farm.policy import FarmPolicy

    with pytest.raises(ValueError, match=re.escape(message)):
        FarmPolicy(**policy)


def test_the_per_board_table_counts_each_place_and_a_lab_devices_rows_without_one():
    from harness.results.boards import board_lines, boards

    def row(n: int, outcome: str, place: str = "", device: str = "pool") -> CaseResult:
        facts = {"place": place, "exporter": f"exp-{place}"} if place else {}
        return CaseResult(f"suites/t.py::t[{n}]", device, outcome, 0.1, float(n), facts=facts)

    results = [
        row(1, "passed", "lab-b"),
        row(2, "infra", "lab-b"),
        row(3, "passed", "lab-a"),
        row(4, "infra"),  # never reached a place
        row(5, "passed", device="host"),  # no lab device: not a board
    ]
    assert [(b.name, dict(b.outcomes), list(b.exporters)) for b in boards(results)] == [
        ("lab-a", {"passed": 1}, ["exp-lab-a"]),
        ("lab-b", {"passed": 1, "infra": 1}, ["exp-lab-b"]),
        ("(no place)", {"infra": 1}, []),
    ]
    lines = board_lines(results)
    assert lines[0].split() == ["board", "passed", "failed", "infra", "devices"]
    assert lines[2].split() == ["lab-b", "1", "0", "1", "pool"]
    assert board_lines(results[-1:]) == []  # no lab: no table
