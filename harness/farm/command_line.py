"""The run's command line: the options the pytest plugin adds, and what they become.

``--device`` and ``--devices-dir`` select the profiles (:mod:`harness.farm.selection`);
``--runtime`` the runtimes each device runs (:mod:`harness.runtime.choice`);
the farm's rules become a :class:`~harness.farm.policy.FarmPolicy`; ``--results-dir``
and ``--html-report`` a :class:`~harness.results.directory.ResultsFolder`. Each is checked
before any test runs and refused as a one-line usage error naming the option.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.codec.mapfile import MapFile, MapFileError, read_map_file
from harness.data.options import OptionsMap
from harness.farm.deadline import RunDeadline
from harness.farm.lock import default_lock_dir
from harness.farm.policy import FarmPolicy
from harness.profiles.device_folders import (
    INI_OPTION,
    DeviceFolder,
    of_project,
    of_working_directory,
    with_built_in,
)
from harness.programs.bundled import read_checked
from harness.programs.contents import ProgramError
from harness.results.directory import (
    REPORT_FILE,
    ResultsFolder,
    default_results_dir,
    unwritable_reason,
)
from harness.runtime.choice import Runtime, RuntimeEntryError, parse_runtimes


def add_options(parser: pytest.Parser) -> None:
    """The plugin's options, in pytest's ``et-harness`` group."""
    group = parser.getgroup("et-harness", "ExecuTorch backend-options harness")
    parser.addini(
        INI_OPTION,
        type="args",
        default=[],
        help="the project's folders of device profiles, relative to this file (looked in "
        "before devices/ beside the rootdir and the built-in profiles)",
    )
    _add_device_options(group)
    _add_farm_options(group)
    _add_program_options(group)
    group.addoption(
        "--html-report",
        type=Path,
        default=None,
        metavar="PATH",
        help="the self-contained HTML report (default: <results dir>/report.html)",
    )


def _add_device_options(group: pytest.OptionGroup) -> None:
    """Which devices, with which runtimes, from which folder of profiles."""
    group.addoption(
        "--device",
        default=None,
        help="device profile(s): a name from devices/ (host, ssh-emu, adb-emu, mcu-emu, ...), "
        "a path to a YAML profile, 'all', 'tag:NAME', or a comma-separated list (default: host)",
    )
    group.addoption(
        "--runtime",
        default=None,
        metavar="LIST",
        help="the runtime(s) every device runs, each test once per runtime: a pinned wheel's "
        "version (1.5.1, 1.5.0), an install prefix, a source tree (PATH or PATH@REV), "
        "comma-separated (default: the profile's agent.sdk, $ET_HARNESS_SDK or the wheel "
        "pinned first)",
    )
    group.addoption(
        "--devices-dir",
        type=Path,
        default=None,
        help="the one folder where device names, 'all' and 'tag:' look (default: the "
        f"project's own, {INI_OPTION} and devices/ beside the rootdir, then the built-in "
        "profiles)",
    )


def _add_farm_options(group: pytest.OptionGroup) -> None:
    """Locks, time limits, retries, quarantine and where the results go."""
    group.addoption(
        "--lock-dir",
        type=Path,
        default=None,
        help="directory of the per-device lock files (default: "
        "$ET_HARNESS_CACHE/locks or ~/.cache/et-harness/locks)",
    )
    group.addoption(
        "--lock-timeout",
        type=float,
        default=FarmPolicy.lock_timeout,
        metavar="SECONDS",
        help="longest wait for a device another process holds (default: %(default)s)",
    )
    group.addoption(
        "--run-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="after this long, remaining tests end at once as infrastructure errors",
    )
    group.addoption(
        "--infra-retries",
        type=int,
        default=FarmPolicy.infra_retries,
        metavar="N",
        help="tries of a test after infrastructure errors, each with a fresh "
        "agent (default: %(default)s)",
    )
    group.addoption(
        "--quarantine-after",
        type=int,
        default=FarmPolicy.quarantine_after,
        metavar="K",
        help="health-check a device after K tests in a row ended in infrastructure "
        "errors; quarantine it if the check fails (default: %(default)s)",
    )
    group.addoption(
        "--emulator-restarts",
        type=int,
        default=FarmPolicy.emulator_restarts,
        metavar="N",
        help="restart an emulated device whose health check fails (a new emulator, "
        "checked again), or power-cycle a lab board whose profile asks recover: power, up "
        "to N times a run before quarantining it (default: %(default)s)",
    )
    group.addoption(
        "--results-dir",
        type=Path,
        default=None,
        help="where results.jsonl, run.json, report.html and artifacts go "
        "(default: results/<timestamp>-<pid>)",
    )


def _add_program_options(group: pytest.OptionGroup) -> None:
    """A program of the user's own, its map and probes, and how maps are judged."""
    group.addoption(
        "--program",
        type=Path,
        default=None,
        metavar="PTE",
        help="a program of your own (.pte, or a BundledProgram .bpte with test cases): "
        "suites/test_user_program.py loads each of its methods on every load path and "
        "checks every delegate against --options",
    )
    group.addoption(
        "--options",
        type=Path,
        default=None,
        metavar="MAP",
        help="with --program: the options map file (docs/map-files.md; default: empty)",
    )
    group.addoption(
        "--probe",
        action="append",
        default=[],
        metavar="NAME",
        help="with --program: a delegate id that is one of the harness's probes (repeatable)",
    )
    group.addoption(
        "--strict-options",
        action="store_true",
        default=False,
        help="options a backend will ignore (a misspelled key, a wrong type, a load-time "
        "option for a backend that reads none then) fail the test before the map is sent "
        "(every et door: load, set, get, check_program) instead of warning",
    )


def device_folders(config: pytest.Config) -> tuple[DeviceFolder, ...] | Path:
    """Where ``--device`` looks: ``--devices-dir``, else the project's folders (its
    ``et_devices_dirs``, ``devices/`` beside its rootdir), then those of the project pytest
    was started in, as ``et-harness devices`` finds them there (the same project unless the
    tests are elsewhere: ``--pyargs harness.suites``, ``et-harness run``), then the
    built-in profiles."""
    explicit: Path | None = config.getoption("devices_dir")
    if explicit is not None:
        return explicit
    named = [str(entry) for entry in config.getini(INI_OPTION)]
    started_in = of_working_directory(config.invocation_params.dir)
    return with_built_in([*of_project(config.rootpath, config.inipath, named), *started_in])


def farm_policy(config: pytest.Config, deadline: RunDeadline) -> FarmPolicy:
    """The run's rules for devices from its options, with the run's ``deadline``."""
    try:
        return FarmPolicy(
            infra_retries=config.getoption("infra_retries"),
            quarantine_after=config.getoption("quarantine_after"),
            emulator_restarts=config.getoption("emulator_restarts"),
            lock_timeout=config.getoption("lock_timeout"),
            lock_dir=config.getoption("lock_dir") or default_lock_dir(),
            deadline=deadline,
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def runtimes(config: pytest.Config) -> tuple[Runtime, ...]:
    """The runtimes ``--runtime`` lists, checked now; () without the option."""
    try:
        return parse_runtimes(config.getoption("runtime"))
    except RuntimeEntryError as exc:
        raise pytest.UsageError(str(exc)) from None


@dataclass(frozen=True)
class UserProgram:
    """``--program``, ``--options`` and ``--probe``: a program of the user's own to check."""

    program: Path
    options: MapFile  # with the effects its options declare
    probes: tuple[str, ...]


def user_program(config: pytest.Config) -> UserProgram | None:
    """The program ``--program`` names, read and checked now (a bad file, map or a
    misplaced option is a one-line usage error), or None."""
    program = config.getoption("program")
    options = config.getoption("options")
    probes = tuple(config.getoption("probe"))
    if program is None:
        if options is not None or probes:
            raise pytest.UsageError("--options and --probe go with --program PTE")
        return None
    base = config.invocation_params.dir
    try:
        read_checked(base / program)  # a .pte or a .bpte
        sent = read_map_file(base / options) if options is not None else MapFile(OptionsMap())
    except (ProgramError, MapFileError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return UserProgram(base / program, sent, probes)


def results_folder(config: pytest.Config) -> ResultsFolder:
    """``--results-dir`` and ``--html-report`` (relative to where pytest was started, by
    default a new ``results/<timestamp>-<pid>``), refused unless this user can write them."""
    base = config.invocation_params.dir
    explicit = config.getoption("results_dir")
    results_dir = base / explicit if explicit else default_results_dir(base)
    html = config.getoption("html_report")
    html_path = base / html if html else results_dir / REPORT_FILE
    for option, target, directory in (
        ("--results-dir", results_dir, results_dir),
        ("--html-report", html_path, html_path.parent),
    ):
        reason = unwritable_reason(directory)
        if option == "--html-report" and target.is_dir():
            reason = f"{target} is a directory"
        if reason is not None:
            raise pytest.UsageError(
                f"{option}: cannot write {target}: {reason}; give a place this user can write"
            )
    return ResultsFolder(results_dir, html_path, eager=bool(explicit or html))
