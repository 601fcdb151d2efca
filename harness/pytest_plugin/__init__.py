"""pytest plugin: ``--device`` (one device or a farm of them) and the fixtures suites use.

Fixtures (the user interface):

- ``device_profile``: the :class:`~harness.profiles.device_profile.DeviceProfile` under test;
- ``et_runtime``: the :class:`~harness.runtime.choice.Runtime` it runs (``--runtime``),
  or None for the device's own;
- ``device``: the :class:`~harness.devices.base.Device`, brought up once per run;
- ``et``: a :class:`~harness.runner.CaseRunner` on that device's agent, reset
  before each test: ``et.load(options)``, ``et.set(...)``, ``et.get(...)`` return
  verdicts (a map, or a map file's path; each map judged first for options without
  effect, :func:`~harness.check.heed_options`, a failure with ``--strict-options``),
  ``verdict.raise_for_differences()`` fails the test with the diff; a
  test that ends with a verdict whose differences it never examined fails
  (:class:`~harness.check.VerdictNotExamined`, naming the call that made it), unless
  it opted out with ``verdict.ignore_differences()`` (a test of a refusal);
- ``probe_program``: ``probe_program(("A", "B"))`` is the device path of a probe
  program whose delegates are A and B;
- ``load_path``: a test that asks for it runs once per load path
  (:class:`~harness.data.messages.LoadPath`, ids ``[program]``, ``[module]``, ...) and
  passes it on, ``et.load(options, path=load_path)``; paths the device's agent does
  not announce in HELLO (``load_paths``) are skipped on that device.

Markers: ``@pytest.mark.capability("load")`` skips a test on devices whose agent
does not serve that action; ``@pytest.mark.backend("XnnpackBackend")`` skips it on
devices whose runtime does not register that backend;
``@pytest.mark.options_without_effect`` leaves a test's maps unjudged (it sends options
without effect on purpose).

Many devices (docs/device-farm.md): ``--device a,b``, ``--device all`` or
``--device tag:NAME`` run every test that uses a device fixture once per device,
its id starting with the device (``test_x[host-2-backends]``); other tests run
once. ``--runtime 1.5.1,1.5.0,PATH`` runs each of them once per runtime too, the
runtime after the device in its id (``test_x[host-1.5.0-2-backends]``); a device whose
agent the harness does not build (firmware, a prebuilt agent) skips them, saying so.
With ``-n N`` each device's tests (all its runtimes) stay on one worker, and a file lock keeps
each device to one holder across processes. Device trouble
(:class:`~harness.transport.base.TransportError`) is an infrastructure error
(outcome ``infra``, letter ``I``, JUnit ``<error>``): retried after an agent
restart, counted towards quarantine. Results go to ``results.jsonl`` as tests
end, and to an HTML report. This module is glue: the logic is in
:mod:`harness.farm`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.check import ContractFileError, Verdict, declare_contract_files
from harness.check.option_outcomes import OptionOutcome
from harness.data.messages import LoadPath
from harness.devices.base import Device
from harness.farm.command_line import (
    UserProgram,
    add_options,
    device_folders,
    farm_policy,
    results_folder,
    runtimes,
    user_program,
)
from harness.farm.deadline import RunDeadline
from harness.farm.distribution import (
    GROUPED_MODES,
    DeviceScheduling,
    DistributionError,
    check_distribution_mode,
)
from harness.farm.rootdir import settle_rootdir
from harness.farm.run_slots import DeviceSlots, SlotKey
from harness.farm.runtime_served import runtime_not_served
from harness.farm.selection import DEFAULT_DEVICE, DeviceSelectionError, select_profiles
from harness.farm.xdist_workers import XdistWorkers, interrupted_by_sigterm, quiet_when_orphaned
from harness.history.live import LiveHistory, add_history_option
from harness.lifecycle.signals import sigterm_when_orphaned, stop_on_sigterm
from harness.profiles.device_profile import DeviceProfile, ProfileError
from harness.profiles.lab_setting import LabgridPlace, pool_names, require_labgrid
from harness.pytest_plugin.stash import (
    DEVICE_PARAM,
    FAILED_TRIES,
    OPTIONS,
    RESULTS_DIR,
    RUNTIME_PARAM,
    SLOTS,
    VERDICTS,
    keep_artifacts,
)
from harness.results.directory import ResultsRecorder, RunInfo
from harness.results.reporting import ControllerReporting
from harness.runner import CaseRunner
from harness.runtime.choice import Runtime
from harness.shipped import BrokenInstallation
from harness.untrusted.value_rules import ValueRuleError

LOAD_PATH_PARAM = "load_path"

# Each test's run and report, on its device.
pytest_plugins = ["harness.pytest_plugin.per_test"]

_NO_DEVICE = pytest.StashKey[str]()  # why the default device is not there (no --device given)
_USER_PROGRAM = pytest.StashKey["UserProgram | None"]()  # --program, checked at configure


# ---- options and configuration -----------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
    add_history_option(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """``--device /abs/x.yaml`` must not move pytest's rootdir (see harness.farm.rootdir)."""
    settle_rootdir(early_config, args)


def _check_environment() -> None:
    """A ``$ET_HARNESS_SDK`` that is no usable prefix, an ``$ET_HARNESS_RUNTIME`` that is
    no source tree (or names no commit), an ``$ET_HARNESS_CACHE_LIMIT`` that is no size,
    or a cache or data folder under a ``~user`` of no user is one usage error at the
    start, not a traceback in the setup of every test."""
    from harness.lifecycle.cache import cache_root, data_root
    from harness.lifecycle.cache_entry import CacheLimitError, size_limit
    from harness.runtime.install_prefix import prefix_from_environment, sdk_from_prefix
    from harness.runtime.wheel_sdk import SdkError

    try:
        cache_root()
        data_root()
        size_limit()
    except (CacheLimitError, ValueRuleError) as exc:
        raise pytest.UsageError(str(exc)) from None
    from harness.runtime.source_tree import check_source, runtime_from_environment

    try:
        prefix = prefix_from_environment()
        if prefix is not None:
            sdk_from_prefix(prefix)
        source = runtime_from_environment()
        if source is not None:
            check_source(*source)
    except SdkError as exc:  # SourceRuntimeError too
        raise pytest.UsageError(str(exc)) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "capability(action): needs the agent to serve action")
    config.addinivalue_line("markers", "backend(name): needs the device to register backend")
    config.addinivalue_line(
        "markers",
        "options_without_effect: sends options that have no effect on purpose (what a "
        "backend does with them): the et fixture does not judge its maps",
    )
    workers = XdistWorkers()
    config.pluginmanager.register(workers, "et-harness-xdist-workers")
    stop_on_sigterm(lambda: interrupted_by_sigterm(workers))  # then teardown, as on Ctrl-C
    worker: dict[str, Any] | None = getattr(config, "workerinput", None)
    if worker is not None:
        sigterm_when_orphaned()  # the controller was killed: stop this worker's devices too
        quiet_when_orphaned(config)  # ... without xdist's warning that it cannot tell it
    _check_environment()
    profiles = _run_profiles(config)
    if profiles:
        _declare_contracts(config)
    config.stash[_USER_PROGRAM] = user_program(config)  # a bad --program: a usage error now
    deadline = (
        RunDeadline(**worker["et_deadline"])
        if worker
        else RunDeadline.starting_now(config.getoption("run_timeout"))
    )
    config.stash[SLOTS] = DeviceSlots(profiles, farm_policy(config, deadline), runtimes(config))
    if worker is not None:
        config.stash[RESULTS_DIR] = Path(worker["et_results_dir"])
    else:
        _configure_controller(config, profiles)
    config.stash[SLOTS].results_dir = config.stash.get(RESULTS_DIR, None)


def _declare_contracts(config: pytest.Config) -> None:
    """The option contracts of the project's own backends: ``backends/*.yaml`` in its
    device folders (docs/map-files.md); a bad file is a usage error, in one line."""
    folders = device_folders(config)
    paths = [folders] if isinstance(folders, Path) else [folder.path for folder in folders]
    try:
        declare_contract_files(paths)
    except ContractFileError as exc:
        raise pytest.UsageError(str(exc)) from None


def _run_profiles(config: pytest.Config) -> tuple[DeviceProfile, ...]:
    """The profiles ``--device`` selects, or the default device's without it. A run that
    named no device (maybe not about the harness at all, or whose device folders only lab
    machines have) goes on when they cannot be read: only its tests that use a device
    fail, with that line (:func:`pytest_generate_tests`)."""
    wanted = config.getoption("device")
    try:
        profiles = select_profiles(wanted, device_folders(config))
        for profile in profiles:
            if LabgridPlace.of(profile) is not None:
                require_labgrid(profile)
        return profiles
    except BrokenInstallation as exc:
        message = str(exc)
    except (DeviceSelectionError, ProfileError) as exc:
        message = str(exc)  # most already start with the option they are about
        if wanted is not None and not message.startswith("--device"):
            message = f"--device: {message}"
    if wanted is not None:
        raise pytest.UsageError(message)
    config.stash[_NO_DEVICE] = f"no --device given, so {DEFAULT_DEVICE}: {message}"
    return ()


def _configure_controller(config: pytest.Config, profiles: tuple[DeviceProfile, ...]) -> None:
    try:
        check_distribution_mode(
            config.getoption("dist", default="no"), config.getoption("device") is not None
        )
    except DistributionError as exc:
        raise pytest.UsageError(str(exc)) from None
    folder = results_folder(config)
    results_dir = config.stash[RESULTS_DIR] = folder.results_dir
    try:
        recorder = ResultsRecorder(
            results_dir,
            RunInfo.starting(
                results_dir.name,
                config.invocation_params.args,
                (p.name for p in profiles),
                config.stash[SLOTS].runtimes,
            ),
            html_path=folder.html_path,
            eager=folder.eager,
            listeners=[history] if (history := LiveHistory.of(config)) else [],
        )
    except OSError as exc:
        raise pytest.UsageError(
            f"--results-dir: cannot write {results_dir}: {exc.strerror}; "
            "give a place this user can write"
        ) from None
    config.pluginmanager.register(ControllerReporting(config, recorder), "et-harness-reporting")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand each worker the run's deadline and results directory."""
    config = node.config
    deadline = config.stash[SLOTS].policy.deadline
    node.workerinput["et_deadline"] = {
        "expires_at": deadline.expires_at,
        "seconds": deadline.seconds,
    }
    node.workerinput["et_results_dir"] = str(config.stash[RESULTS_DIR])


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> DeviceScheduling | None:
    """xdist controller: keep each device's tests on one worker (a pool's on up to N)."""
    if config.getoption("dist") not in GROUPED_MODES:
        return None
    slots = config.stash[SLOTS]
    return DeviceScheduling(config, slots.names, log, pools=pool_names(slots.profiles.values()))


def pytest_report_header(config: pytest.Config) -> list[str]:
    slots = config.stash[SLOTS]
    policy = slots.policy
    timeout = f"{policy.deadline.seconds:g} s" if policy.deadline.seconds else "none"
    chosen = f"; runtimes: {', '.join(slots.runtimes)}" if slots.runtimes else ""
    return [
        f"devices: {', '.join(slots.names)}{chosen}",
        f"device farm: infra retries {policy.infra_retries}, quarantine after "
        f"{policy.quarantine_after}, lock timeout {policy.lock_timeout:g} s, run timeout "
        f"{timeout}, locks in {policy.lock_dir}",
    ]


# ---- one test per device -------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if DEVICE_PARAM in metafunc.fixturenames:
        missing = metafunc.config.stash.get(_NO_DEVICE, "")
        if missing:
            raise pytest.UsageError(missing)
        names = metafunc.config.stash[SLOTS].names
        metafunc.parametrize(DEVICE_PARAM, names, ids=names, indirect=True, scope="session")
        labels = list(metafunc.config.stash[SLOTS].runtimes)
        if labels:
            metafunc.parametrize(RUNTIME_PARAM, labels, ids=labels, indirect=True, scope="session")
    if LOAD_PATH_PARAM in metafunc.fixturenames:
        paths = list(LoadPath)
        metafunc.parametrize(LOAD_PATH_PARAM, paths, ids=[p.label for p in paths], indirect=True)


def _slot_key(request: pytest.FixtureRequest, device_name: str) -> SlotKey:
    runtime = request.getfixturevalue(RUNTIME_PARAM)
    return (device_name, runtime.label if runtime is not None else "")


# ---- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def et_runtime(request: pytest.FixtureRequest) -> Runtime | None:
    """The runtime under test (``--runtime``), or None: the device's own."""
    label = getattr(request, "param", None)
    return request.config.stash[SLOTS].runtimes[label] if label is not None else None


@pytest.fixture(scope="session")
def device_profile(et_runtime: Runtime | None, request: pytest.FixtureRequest) -> DeviceProfile:
    """The profile of the device under test."""
    return request.config.stash[SLOTS].profiles[request.param]


@pytest.fixture(scope="session")
def device(
    device_profile: DeviceProfile, et_runtime: Runtime | None, request: pytest.FixtureRequest
) -> Iterator[Device]:
    """The device under test with its runtime: held (lock), brought up and health-checked
    once (again for the next runtime, after this one's tests)."""
    if et_runtime is not None and (reason := runtime_not_served(device_profile, et_runtime)):
        pytest.skip(reason)
    slot = request.config.stash[SLOTS][_slot_key(request, device_profile.name)]
    try:
        yield slot.open()
    finally:
        slot.close()


@pytest.fixture(scope="session")
def _et_runner(device: Device, request: pytest.FixtureRequest) -> CaseRunner:
    runner = request.config.stash[SLOTS][_slot_key(request, device.name)].runner
    assert runner is not None, "the device slot was closed while its tests run"
    return runner


@pytest.fixture
def et(
    _et_runner: CaseRunner, device_profile: DeviceProfile, request: pytest.FixtureRequest
) -> CaseRunner:
    """The case runner, reset so that nothing leaks in from an earlier test."""
    slot = request.config.stash[SLOTS][_slot_key(request, device_profile.name)]
    slot.reset(request.node.stash.setdefault(FAILED_TRIES, []), keep_artifacts(request.node, slot))
    for marker in request.node.iter_markers("capability"):
        served = str(_et_runner.hello.fact("capabilities") or "").split(",")
        if marker.args[0] not in served:
            pytest.skip(
                f"the device's agent does not serve {marker.args[0]!r} "
                f"(it announces: {','.join(served)}){_lacks(_et_runner)}"
            )
    for marker in request.node.iter_markers("backend"):
        if marker.args[0] not in _et_runner.registered:
            pytest.skip(
                f"the device does not register backend {marker.args[0]!r} "
                f"(registered: {', '.join(_et_runner.registered) or 'none'})"
            )
    verdicts: list[Verdict] = []
    request.node.stash[VERDICTS] = verdicts
    _et_runner.on_verdict = verdicts.append
    outcomes: list[OptionOutcome] = []
    request.node.stash[OPTIONS] = outcomes
    _et_runner.on_options = outcomes.extend
    _et_runner.strict_options = request.config.getoption("strict_options")
    _et_runner.options_judged = request.node.get_closest_marker("options_without_effect") is None
    return _et_runner


@pytest.fixture
def load_path(_et_runner: CaseRunner, request: pytest.FixtureRequest) -> LoadPath:
    """The load path this test runs on; skipped where the device does not serve it."""
    path: LoadPath = request.param
    served = _et_runner.load_paths
    if path not in served:
        pytest.skip(
            f"the device's agent does not serve load path {path.label!r} "
            f"(it announces: {','.join(p.label for p in served)}){_lacks(_et_runner)}"
        )
    return path


def _lacks(runner: CaseRunner) -> str:
    """HELLO's ``lacks`` (what a runtime built from a source tree lacks) as a reason."""
    lacks = runner.hello.fact("lacks")
    return f": the runtime lacks {lacks}" if isinstance(lacks, str) and lacks else ""


@pytest.fixture(scope="session")
def users_program(request: pytest.FixtureRequest) -> UserProgram:
    """The program given with ``--program`` (and ``--options``, ``--probe``); skipped
    without one."""
    given = request.config.stash[_USER_PROGRAM]
    if given is None:
        pytest.skip("no --program given (pytest --device D --program model.pte --options map.yaml)")
    return given


@pytest.fixture
def probe_program(_et_runner: CaseRunner):
    """``probe_program(delegate_ids)`` -> device path of a matching probe program (on the
    board the runner is on now: a pool's runner may move to another board)."""
    return _et_runner.program_for


@pytest.hookimpl(tryfirst=True)  # before the results are finished: run.json lists holdings
def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[SLOTS].close()
