"""A device that stops answering or crashes ends its test in bounded time, as an
infrastructure error, with its crash artifacts kept: Hypothesis tests included.

pytest subprocesses on a host-like device whose agent sits behind the relay of
tests/system/test_farm_runs.py; the relay SIGSTOPs, hangs or crashes the real agent after
N requests. Bounds are read from results.jsonl (each test's reported duration and
start), not timed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_farm_runs import Farm, fails_in_call_of

CASE_TIMEOUT = 3.0

PROPERTY_CASES = """\
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.data.options import OptionsMap


def test_before(et):
    et.set(OptionsMap.from_dict({"ProbeA": {"k": 1}})).raise_for_differences()


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(0, 10**6), s=st.text("abc", max_size=8))
def test_property(et, k, s):
    et.reset()  # as suites/test_properties.py does per example
    et.set(OptionsMap.from_dict({"ProbeA": {"k": k}, "ProbeB": {"s": s}})).raise_for_differences()


def test_after(et):
    et.set(OptionsMap.from_dict({"ProbeA": {"k": 2}})).raise_for_differences()
"""

# Requests: HELLO; test_before: RESET, REGISTER (ProbeA), SET; test_property: RESET, then
# per example RESET, (REGISTER ProbeB the first time) and SET. So after 8 requests the
# property test has run its first example and is in the middle of its run.
INTO_THE_PROPERTY_TEST = 8


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One device work directory for the module: the agent is copied there once."""
    return tmp_path_factory.mktemp("device-work")


def _property_farm(tmp_path: Path, work_dir: Path) -> Farm:
    farm = Farm(tmp_path, work_dir)
    (tmp_path / "test_cases.py").write_text(PROPERTY_CASES, "utf-8")
    return farm


def _requests_seen(farm: Farm, device: str) -> int:
    return int((farm.root / f"{device}.state").read_text("utf-8"))


@pytest.mark.slow
def test_a_stopped_agent_ends_a_hypothesis_test_within_twice_the_case_timeout(tmp_path, work_dir):
    farm = _property_farm(tmp_path, work_dir)
    farm.profile(
        "frozen",
        case_timeout=CASE_TIMEOUT,
        relay=[
            "--state",
            str(tmp_path / "frozen.state"),
            "--after",
            str(INTO_THE_PROPERTY_TEST),
            "--then",
            "stop",
        ],
    )
    run = farm.run("--device", "frozen", "--quarantine-after", "100")
    assert run.returncode == 1, run.stdout  # device trouble: not green, not INTERNALERROR
    results = run.results()
    assert list(results) == ["test_before[frozen]", "test_property[frozen]", "test_after[frozen]"]
    assert results["test_before[frozen]"]["outcome"] == "passed"
    frozen = results["test_property[frozen]"]
    assert frozen["outcome"] == "infra", frozen["longrepr"]
    assert (frozen["infra"]["type"], frozen["infra"]["phase"]) == ("TransportTimeout", "call")
    # The first try waited one case timeout, the retry on a restarted agent one more;
    # every other example failed at once instead of waiting out its own timeout.
    assert 2 * CASE_TIMEOUT <= frozen["duration"] < 2 * CASE_TIMEOUT + 3, frozen["duration"]
    # Hypothesis saw the timeout, then the refusals after it, and called that flaky: the
    # tries are reported as what they were.
    assert [t.split(":")[0] for t in frozen["failed_tries"]] == ["TransportTimeout"] * 2
    after = results["test_after[frozen]"]
    assert (after["outcome"], after["infra"]["phase"]) == ("infra", "setup")
    assert after["duration"] < 2 * CASE_TIMEOUT + 3
    # Nothing but one HELLO per restarted agent reached the device after it froze.
    agents_started_after = 1 + 2  # the property test's retry; test_after's reset and retry
    assert _requests_seen(farm, "frozen") == INTO_THE_PROPERTY_TEST + 1 + agents_started_after


@pytest.mark.slow
def test_the_run_timeout_ends_a_running_test_within_seconds_of_the_deadline(tmp_path, work_dir):
    farm = Farm(tmp_path, work_dir, cases=6)
    farm.profile(
        "slow",
        case_timeout=120,
        relay=[
            "--state",
            str(tmp_path / "slow.state"),
            "--after",
            str(fails_in_call_of(2)),
            "--then",
            "hang",
        ],
    )
    run_timeout = 8.0
    run = farm.run("--device", "slow", "--run-timeout", f"{run_timeout:g}", timeout=60)
    assert run.returncode == 1, run.stdout
    started = json.loads((run.results_dir / "run.json").read_text("utf-8"))["started"]
    results = run.results()
    hung = results["test_set[slow-2]"]
    assert (hung["outcome"], hung["infra"]["type"]) == ("infra", "RunTimeExpired")
    assert "--run-timeout 8 s" in hung["infra"]["message"]
    assert len(hung["failed_tries"]) == 1  # no retry once the run's time is up
    ended = hung["started"] + hung["duration"]
    assert ended - (started + run_timeout) < 3, ended - started
    for n in range(3, 6):
        assert results[f"test_set[slow-{n}]"]["infra"]["type"] == "RunTimeExpired"


def test_each_try_that_crashed_keeps_its_own_core_file_inside_hypothesis(tmp_path, work_dir):
    pattern = Path("/proc/sys/kernel/core_pattern").read_text("utf-8").strip()
    kernel_writes_core_here = not (pattern.startswith("|") or "/" in pattern)
    farm = _property_farm(tmp_path, work_dir)
    crash_work = tmp_path / "crash-work"
    farm.profile(
        "crashy",
        work_dir=crash_work,
        relay=[
            "--state",
            str(tmp_path / "crashy.state"),
            "--after",
            str(INTO_THE_PROPERTY_TEST),
            "--then",
            "crash-every",
            "--cwd",
            str(crash_work),
        ],
    )
    run = farm.run("--device", "crashy", "--quarantine-after", "100")
    assert run.returncode == 1, run.stdout
    crashed = run.results()["test_property[crashy]"]
    assert (crashed["outcome"], crashed["infra"]["type"]) == ("infra", "TransportLost")
    assert [t.split(":")[0] for t in crashed["failed_tries"]] == ["TransportLost"] * 2
    if not kernel_writes_core_here:
        assert crashed["artifacts"] == []
        return
    expected = [
        "artifacts/crashy/test_property_crashy_/try-1/core",
        "artifacts/crashy/test_property_crashy_/try-2/core",
    ]
    assert crashed["artifacts"] == expected
    cores = [(run.results_dir / path).read_bytes() for path in expected]
    assert all(core[:4] == b"\x7fELF" for core in cores) and cores[0] != cores[1]
    assert not (crash_work / "core").exists()
