"""``et-harness``'s command line: its parser, one function per command's arguments.

The commands themselves are in :mod:`harness.cli.main`; ``doctor``, ``history``,
``cache``, ``lab`` and ``bisect`` add their own arguments from their modules.
"""

from __future__ import annotations

import argparse
from typing import TypeAlias

from harness import __version__
from harness.cli import bisect as bisect_command
from harness.cli import cache_command, chaos_command, doctor, lab_command
from harness.history import command as history_command

__all__ = ["parser", "positive_int"]

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

_MAX_COUNT = 1_000_000  # of cases, runs or a window: a larger one is a typo


def positive_int(text: str) -> int:
    """A count given on the command line: a whole number from 1 to 1,000,000."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= number <= _MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{number} is not within 1..{_MAX_COUNT}")
    return number


def parser(description: str) -> argparse.ArgumentParser:
    """The parser of every command (``description``: the tool's, for ``--help``)."""
    parser = argparse.ArgumentParser(prog="et-harness", description=description)
    parser.add_argument("--version", action="version", version=f"et-harness {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_map(commands)
    _add_run(commands)
    commands.add_parser("devices", help="list and check the device profiles in devices/")
    _add_send(commands)
    doctor.add_parser(commands)
    _add_emu(commands)
    _add_bench(commands)
    history_command.add_parser(commands, positive_int)
    cache_command.add_parser(commands)
    lab_command.add_parser(commands)
    bisect_command.add_parser(commands)
    chaos_command.add_parser(commands)
    return parser


def _add_map(commands: Commands) -> None:
    """``map FILE``: validate, encode and decode a map file."""
    map_cmd = commands.add_parser("map", help="validate, encode and decode a map file")
    map_cmd.add_argument(
        "file",
        help="YAML or JSON map file (docs/map-files.md), or a shipped example's name (sample)",
    )
    map_cmd.add_argument(
        "--action",
        choices=["load", "set", "get"],
        default="load",
        help="the request to encode the map into (default: load)",
    )
    map_cmd.add_argument("--hex", action="store_true", help="also print the bytes")
    map_cmd.add_argument(
        "--strict-options",
        action="store_true",
        help="options a backend will ignore, judged as send and pytest judge them (a "
        "misspelled key, a wrong type, ...), fail the check (exit 1) instead of warning",
    )
    map_cmd.add_argument(
        "--json",
        action="store_true",
        help="print the decoded request in the wire format's readable form",
    )


def _add_run(commands: Commands) -> None:
    """``run``: the device suites with pytest; other arguments go to pytest."""
    run_cmd = commands.add_parser(
        "run",
        help="run the device suites on a device (other arguments go to pytest)",
        description="Run the suites in suites/ with pytest on the devices named; every other "
        "argument goes to pytest (e.g. -n 4, -k xnnpack, -x, --results-dir DIR: "
        "docs/device-farm.md).",
    )
    run_cmd.add_argument(
        "--device",
        default="host",
        help="profile name or YAML path; a,b,c; all; tag:NAME (default: host)",
    )


def _add_send(commands: Commands) -> None:
    """``send``: one map file, or a program and its map, to one device."""
    send_cmd = commands.add_parser(
        "send", help="send one map file (or a program and its map) to one device, print verdicts"
    )
    send_cmd.add_argument(
        "file", nargs="?", help="YAML or JSON map file, or a shipped example's name (sample)"
    )
    send_cmd.add_argument(
        "--program",
        help="a program file (.pte, or a BundledProgram .bpte: its test cases' inputs, "
        "their outputs compared with the expected ones): every method loaded on every "
        "load path the device serves, each delegate's init checked against the map (README)",
    )
    send_cmd.add_argument("--options", help="with --program: the map file (default: empty)")
    send_cmd.add_argument(
        "--probe",
        action="append",
        default=[],
        help="a backend id to register as one of the harness's probes, beside its own "
        "(Probe...); with --program, a delegate id that is one (repeatable)",
    )
    send_cmd.add_argument(
        "--strict-options",
        action="store_true",
        help="options a backend will ignore (a misspelled key, a wrong type, a load-time "
        "option for a backend that reads none then) refuse the map before it is sent "
        "(exit 1) instead of warning",
    )
    send_cmd.add_argument(
        "--device", default="host", help="profile name or YAML path (default: host)"
    )
    send_cmd.add_argument(
        "--action",
        choices=["load", "set", "get"],
        default="load",
        help="load: the map at load time, checked on a program of the harness's (its "
        "probes, then XnnpackBackend); set, get: the global set_option / get_option "
        "(default: load)",
    )


def _add_emu(commands: Commands) -> None:
    """``emu NAME``: an emulated device up until Ctrl-C."""
    emu_cmd = commands.add_parser("emu", help="bring an emulated device up until Ctrl-C")
    emu_cmd.add_argument(
        "device", help="an emulated profile: ssh-emu, adb-emu, mcu-emu, mcu-m55-emu"
    )
    emu_cmd.add_argument(
        "--lab-address",
        metavar="HOST[:PORT]",
        help="serve it on this address of the machine (a labgrid exporter's), at PORT (else "
        "the port of its first start, kept), until it is stopped or what it serves dies, and "
        "print the exporter config (docs/device-farm.md)",
    )
    emu_cmd.add_argument(
        "--protocol",
        choices=["rfc2217", "raw"],
        default="rfc2217",
        help="with --lab-address, an MCU board's serial port: RFC 2217 or raw TCP, as the "
        "exporter's NetworkSerialPort says (default: rfc2217)",
    )


def _add_bench(commands: Commands) -> None:
    """``bench``: what a case costs."""
    bench_cmd = commands.add_parser("bench", help="measure per-case cost (docs/performance.md)")
    bench_cmd.add_argument(
        "--device", default="host", help="profile names or YAML paths: a,b,c (default: host)"
    )
    bench_cmd.add_argument(
        "--cases", type=positive_int, default=300, help="session-mode cases (default: 300)"
    )
    bench_cmd.add_argument(
        "--per-case-cases",
        type=positive_int,
        default=30,
        help="cases done the per-case way (push, run one-shot, pull) (default: 30)",
    )
    bench_cmd.add_argument(
        "--growth-cases",
        type=positive_int,
        default=30,
        help="cases per map shape when measuring growth (default: 30)",
    )
    bench_cmd.add_argument(
        "--scaling",
        action="store_true",
        help="also time the whole suite run on 1..N of the devices, one xdist worker per device",
    )
    bench_cmd.add_argument("--json", help="write all figures to this JSON file")
