"""pytest plugin: ``--device`` and the fixtures device test suites use.

Fixtures (the user interface):

- ``device_profile``: the :class:`~harness.profile.DeviceProfile` under test;
- ``device``: the :class:`~harness.device.Device`, brought up once per run;
- ``et``: a :class:`~harness.runner.CaseRunner` on that device's agent, reset
  before each test: ``et.load(options)``, ``et.set(...)``, ``et.get(...)`` return
  verdicts, ``verdict.raise_for_differences()`` fails the test with the diff;
- ``probe_program``: ``probe_program(("A", "B"))`` is the device path of a probe
  program whose delegates are A and B.

Markers: ``@pytest.mark.capability("load")`` skips a test on devices whose agent
does not serve that action; ``@pytest.mark.backend("XnnpackBackend")`` skips it on
devices whose runtime does not register that backend.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator

import pytest

from harness.check import Verdict
from harness.device import Device, open_device
from harness.profile import DeviceProfile, ProfileError, load_profile
from harness.runner import CaseRunner
from harness.transport.base import TransportError

_PROFILE_KEY = pytest.StashKey[DeviceProfile]()
_VERDICTS_KEY = pytest.StashKey[list[tuple[str, Verdict]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("et-harness", "ExecuTorch backend-options harness")
    group.addoption(
        "--device",
        default="host",
        help="device profile: a name from devices/ (host, ssh-emu, adb-emu, mcu-emu, ...) "
        "or a path to a YAML profile (default: host)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "capability(action): needs the agent to serve action")
    config.addinivalue_line("markers", "backend(name): needs the device to register backend")
    try:
        config.stash[_PROFILE_KEY] = load_profile(config.getoption("device"))
    except ProfileError as exc:
        raise pytest.UsageError(f"--device: {exc}") from None
    config.stash[_VERDICTS_KEY] = []


@pytest.fixture(scope="session")
def device_profile(pytestconfig: pytest.Config) -> DeviceProfile:
    """The profile of the device under test."""
    return pytestconfig.stash[_PROFILE_KEY]


@pytest.fixture(scope="session")
def device(device_profile: DeviceProfile) -> Iterator[Device]:
    """The device under test, brought up once for the run."""
    dev = open_device(device_profile)
    try:
        yield dev
    finally:
        dev.close()


@pytest.fixture(scope="session")
def _et_runner(device: Device) -> Iterator[CaseRunner]:
    runner = CaseRunner(device.start_link, device.program_for)
    try:
        yield runner
    finally:
        runner.close()


@pytest.fixture
def et(_et_runner: CaseRunner, request: pytest.FixtureRequest) -> CaseRunner:
    """The case runner, reset so that nothing leaks in from an earlier test."""
    for marker in request.node.iter_markers("capability"):
        served = str(_et_runner.hello.fact("capabilities") or "").split(",")
        if marker.args[0] not in served:
            pytest.skip(f"the device's agent does not serve {marker.args[0]!r} "
                        f"(it announces: {','.join(served)})")
    for marker in request.node.iter_markers("backend"):
        if marker.args[0] not in _et_runner.registered:
            pytest.skip(f"the device does not register backend {marker.args[0]!r} "
                        f"(registered: {', '.join(_et_runner.registered) or 'none'})")
    _et_runner.reset()
    _et_runner.on_verdict = lambda verdict: request.config.stash[_VERDICTS_KEY].append(
        (request.node.nodeid, verdict)
    )
    return _et_runner


@pytest.fixture
def probe_program(device: Device):
    """``probe_program(delegate_ids)`` -> device path of a matching probe program."""
    return device.program_for


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(TransportError):
        report.user_properties.append(("infrastructure_error", call.excinfo.typename))
        report.sections.append(
            ("device trouble", "infrastructure error: the device or its link failed, "
             "not the runtime under test")
        )
    return report


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    verdicts = config.stash.get(_VERDICTS_KEY, [])
    if not verdicts:
        return
    profile = config.stash[_PROFILE_KEY]
    per_backend: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for _, verdict in verdicts:
        for outcome in verdict.backends:
            per_backend[outcome.name]["ok" if outcome.ok else "wrong"] += 1
    terminalreporter.section(f"backend options delivery on {profile.name}")
    rows = sorted(per_backend.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    shown = rows[:25]
    width = max(len(name) for name, _ in shown)
    terminalreporter.write_line(f"{'backend':<{width}}  checks  exact  wrong")
    for name, counts in shown:
        total = counts["ok"] + counts["wrong"]
        terminalreporter.write_line(
            f"{name:<{width}}  {total:>6}  {counts['ok']:>5}  {counts['wrong']:>5}"
        )
    if len(rows) > len(shown):
        rest = rows[len(shown):]
        wrong = sum(c["wrong"] for _, c in rest)
        terminalreporter.write_line(
            f"... and {len(rest)} more backends (generated names): "
            f"{sum(sum(c.values()) for _, c in rest)} checks, {wrong} wrong"
        )
    failed = [(node, v) for node, v in verdicts if not v.ok]
    terminalreporter.write_line(
        f"{len(verdicts)} verdicts, {len(verdicts) - len(failed)} exact, {len(failed)} with differences"
    )
