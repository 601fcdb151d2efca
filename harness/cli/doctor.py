"""``et-harness doctor``: the devices a user has, brought up one by one, and each one's
health: the programs this machine needs for them, the agent's HELLO, and the backends the
device registers against those its profile names.

The project's option contracts (``backends/*.yaml``) are read first, as pytest reads
them. Without ``--device`` it checks the project's own profiles (its device folders) and the
default device (``host``, what a bare ``pytest`` runs on); the built-in examples only when
named (``--device all``, ``--device pixel8``). Profile files are shown relative to the
working directory, or as built-in: never as a path into the installed package.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.profiles.device_folders import (
    DeviceFolder,
    built_in,
    listing,
    of_working_directory,
    with_built_in,
)
from harness.profiles.device_profile import DeviceProfile, ProfileError
from harness.untrusted.reading import printable

if TYPE_CHECKING:
    from harness.data.messages import Report
    from harness.devices.base import Device
    from harness.runner import CaseRunner

_NAME_WIDTH = 12  # a listing's first column is at least this wide
_STATE_WIDTH = 11


def add_parser(commands: Any) -> None:
    """The ``doctor`` subcommand's options, on ``et-harness``'s subparsers."""
    cmd = commands.add_parser(
        "doctor",
        help="bring the project's devices up and report their health",
        description=__doc__.split("\n\n")[0],
    )
    cmd.add_argument(
        "--packages",
        action="store_true",
        help="only print the Debian packages the devices need on this machine, one a line "
        "(what a lean runner installs: apt-get install $(et-harness doctor --packages ...)); "
        "no device is brought up",
    )
    cmd.add_argument(
        "--device",
        default=None,
        help="profiles: a,b,c; all (the built-in examples too); tag:NAME (default: the "
        "project's own profiles and host)",
    )


def name_width(names: Iterable[str]) -> int:
    """The width of a listing's first column: its longest device name, at least 12."""
    return max([_NAME_WIDTH, *(len(name) for name in names)])


SEND_LAB_WAIT_S = 60.0  # how long send waits for a lab place
DOCTOR_LAB_WAIT_S = 10.0  # ... and doctor, for each lab profile (a busy one is UNAVAILABLE)


@contextmanager
def lab_place(
    profile: DeviceProfile, wait: float
) -> Iterator[tuple[DeviceProfile, Callable[[], None] | None]]:
    """``profile`` as a command that brings one device up opens it: a lab profile's place
    held for the block (the user's own, else reserved within ``wait`` s and handed back),
    its address filled in; with the board's outside reset, if the lab has one."""
    from harness.profiles.lab_setting import LabgridPlace, require_labgrid

    wanted = LabgridPlace.of(profile)
    if wanted is None:
        yield profile, None
        return
    require_labgrid(profile)
    from harness.lab.own_place import held_for_command  # asyncio: labs only

    with held_for_command(profile, wanted, wait) as opened:
        yield opened


@dataclass(frozen=True)
class _Row:
    """One device's line: its state, what was found, and the notes under it."""

    state: str
    text: str
    notes: tuple[str, ...] = ()


def run_doctor(args: argparse.Namespace) -> int:
    from harness.farm.selection import DEFAULT_DEVICE, select_profiles

    here = Path.cwd()
    rows: dict[str, DeviceProfile | _Row]
    if args.device is not None:
        rows = {profile.name: profile for profile in select_profiles(args.device)}
    else:
        # Each of the project's profiles by its file: a name there is anyone's.
        found = {entry.name: str(entry.path) for entry in listing(_project_folders(here))}
        found.setdefault(DEFAULT_DEVICE, DEFAULT_DEVICE)
        print(
            printable(
                f"checking {', '.join(found)}: the project's profiles and the default device "
                "(every profile, the built-in examples too: et-harness doctor --device all)"
            )
        )
        rows = {name: _selected(spec) for name, spec in found.items()}
    contracts = _contracts(here)
    if contracts is not None:  # a name no profile has: a file's stem holds no '/'
        rows = {"backends/": contracts, **rows}
    profiles = [p for p in rows.values() if isinstance(p, DeviceProfile)]
    if args.packages:
        return _print_packages(profiles, rows)
    _print_host_tools(profiles)
    width = name_width(rows)
    unhealthy = 0
    for name, chosen in rows.items():
        row = _check(chosen) if isinstance(chosen, DeviceProfile) else chosen
        for index, text in enumerate((row.text, *row.notes)):
            first = (name, row.state) if index == 0 else ("", "")
            line = f"{first[0]:<{width}} {first[1]:<{_STATE_WIDTH}} {_shown_paths(text, here)}"
            print(printable(line))
        unhealthy += row.state != "ok"
    return 1 if unhealthy else 0


def _project_folders(here: Path) -> tuple[DeviceFolder, ...]:
    """The device folders of the project ``here`` is in, without the built-in one."""
    return with_built_in(of_working_directory(here))[:-1]


def _contracts(here: Path) -> _Row | None:
    """The project's option contracts (``backends/*.yaml`` in its device folders), read as
    pytest reads them at start: INVALID with the one line pytest would stop at; None
    when the project declares none."""
    from harness.check import ContractFileError, declare_contract_files

    try:
        declared = declare_contract_files(folder.path for folder in _project_folders(here))
    except ContractFileError as exc:
        return _Row("INVALID", str(exc))
    if not declared:
        return None
    listed = ", ".join(f"{c.backend} ({c.pinned_by})" for c in declared)
    return _Row("ok", f"option contracts: {listed}")


def _selected(spec: str) -> DeviceProfile | _Row:
    """The profile ``spec`` (a name or a file) selects, checked, or an INVALID row saying
    what is wrong with it."""
    from harness.farm.selection import select_profiles

    try:
        (profile,) = select_profiles(spec)
    except ProfileError as exc:
        return _Row("INVALID", str(exc))
    return profile


def _check(profile: DeviceProfile) -> _Row:
    """``profile``'s device brought up: its HELLO, or why it could not be."""
    from harness.devices.base import DeviceSetupError
    from harness.transport.base import DeviceUnavailable

    started = time.monotonic()
    try:
        with opened(profile, DOCTOR_LAB_WAIT_S) as (device, runner):
            return _row(profile, device, runner.hello, started)
    except (DeviceUnavailable, DeviceSetupError, ProfileError) as exc:
        return _Row("UNAVAILABLE", str(exc))
    except Exception as exc:
        return _Row("UNHEALTHY", f"{type(exc).__name__}: {exc}")


@contextmanager
def opened(profile: DeviceProfile, lab_wait: float) -> Iterator[tuple[Device, CaseRunner]]:
    """``profile``'s device and a runner on it, closed after the block; a lab profile's
    place held for the block (:func:`lab_place`, waiting at most ``lab_wait`` s)."""
    from harness.runner import open_runner

    with lab_place(profile, lab_wait) as (brought, board_reset):
        device, runner = open_runner(brought, board_reset=board_reset)
        try:
            yield device, runner
        finally:
            runner.close()
            device.close()


def _row(profile: DeviceProfile, device: Device, hello: Report, started: float) -> _Row:
    """A device's line from its HELLO: what it is, and how its backends match the profile."""
    real = [entry.name for entry in hello.entries if not entry.is_probe]
    text = (
        f"{time.monotonic() - started:5.1f} s  abi={hello.fact('abi')}  "
        f"runtime={hello.fact('runtime')!s}  agent={hello.fact('agent_version')}  "
        f"deployment={device.deployment().mode.value}  backends={','.join(real) or '-'}"
    )
    describe = getattr(device.emulator, "describe", None)  # a board that boots: its kernel
    if describe is not None:
        text += f"  {describe()}"
    lacking, unnamed = _backend_differences(profile.backends, real)
    notes = []
    if lacking:
        notes.append(
            f"{profile.where('backends')}: names {', '.join(lacking)}, which the device "
            "does not register; correct the list, or the device's runtime"
        )
    if unnamed and profile.backends:
        notes.append(
            f"the device also registers {', '.join(unnamed)}, which the profile does not name"
        )
    return _Row("MISMATCH" if lacking else "ok", text, tuple(notes))


def _backend_differences(
    named: Sequence[str], registered: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The backends a profile names that the device does not register, and those it
    registers that the profile does not name, each in its list's order."""
    return [b for b in named if b not in registered], [b for b in registered if b not in named]


def _shown_paths(text: str, here: Path) -> str:
    """``text`` with the built-in profiles shown as built-in and the working directory's
    files relative to it."""
    text = text.replace(f"{built_in().path}{os.sep}", "built-in ")
    return text.replace(f"{here}{os.sep}", "")


def _print_packages(profiles: Sequence[DeviceProfile], rows: Mapping[str, object]) -> int:
    """The Debian packages of every program ``profiles`` need, each once, sorted; an
    invalid profile's row on stderr (exit 1)."""
    from harness.devices.bring_up import needed_host_tools

    for name, row in rows.items():
        if isinstance(row, _Row):
            print(printable(f"et-harness doctor: {name}: {row.text}"), file=sys.stderr)
    for package in sorted({tool.package for p in profiles for tool in needed_host_tools(p)}):
        print(package)
    return 1 if len(profiles) != len(rows) else 0


def _print_host_tools(profiles: Sequence[DeviceProfile]) -> None:
    """The programs these devices need on this machine: found or missing, the Debian
    package of each, and the devices that need it."""
    from harness.devices.bring_up import needed_host_tools
    from harness.devices.host_tools import HostTool

    needed_by: dict[HostTool, list[str]] = {}
    for profile in profiles:
        for tool in needed_host_tools(profile):
            needed_by.setdefault(tool, []).append(profile.name)
    width = name_width(tool.command for tool in needed_by)
    print("programs on this machine:")
    for tool, names in needed_by.items():
        state = "ok" if tool.found() else "absent" if tool.without else "MISSING"
        without = f" (without it: {tool.without})" if tool.without else ""
        print(
            f"  {tool.command:<{width}} {state:<8} Debian {tool.package:<22} "
            f"{tool.purpose}{without}: {', '.join(names)}"
        )
