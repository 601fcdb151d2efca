"""``et-harness``: the harness for people, outside pytest.

- ``et-harness map FILE``: validate a map file, encode it as a wire request,
  decode it again and print it (with ``--hex``, the bytes too);
- ``et-harness run [--device NAME] [PYTEST ARGS]``: run the device suites on a
  device and print a per-backend summary;
- ``et-harness send FILE --device NAME``: send one map to one device, print verdicts;
- ``et-harness doctor``: bring the project's devices up and report their health;
- ``et-harness emu NAME``: keep an emulated device up until Ctrl-C;
- ``et-harness bench``: measure what a case costs (docs/performance.md);
- ``et-harness devices``: list the device profiles;
- ``et-harness history``: what changed since the last run, flaky checks, device
  health, where a failure began (docs/device-farm.md, "Run history");
- ``et-harness lab quarantine list|clear PLACE``: a labgrid lab's places out of service
  (docs/device-farm.md, "Lab-wide quarantine");
- ``et-harness cache [clean] [--kind K]``: what the harness cache holds, and cleaning
  it (docs/lifecycle.md, "The cache and the data").
- ``et-harness bisect TREE --good REV --bad REV -- TESTS``: the commit of an ExecuTorch
  source tree where the tests change (docs/source-runtime.md).
- ``et-harness chaos --duration S --seed N``: the suites on the emulated devices under
  seeded faults, then the invariants checked (docs/chaos.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from harness import shipped
from harness.check import (
    NoEffectWarning,
    OptionsWithoutEffect,
    Route,
    declare_contract_files,
    format_value,
    heed_options,
    show_name,
)
from harness.check.rendering import returned_lines
from harness.cli import arguments, cache_command, chaos_command, doctor, lab_command
from harness.cli.command_error import CliError
from harness.codec import readable, wire
from harness.codec.mapfile import MapFile, MapFileError, load_map, read_map_file
from harness.data.messages import Action, Request
from harness.data.options import OptionsMap
from harness.errors import HarnessError
from harness.history import command as history_command
from harness.profiles.device_folders import (
    built_in,
    listing,
    of_working_directory,
    with_built_in,
)
from harness.profiles.device_profile import ProfileError, load_profile
from harness.untrusted.reading import printable

if TYPE_CHECKING:
    from harness.devices.base import Device
    from harness.runner import CaseRunner


_ROUTES = {"load": Route.LOAD, "set": Route.SET, "get": Route.GET}


def _judged(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``command(args)``, which judges the map it sends (``heed_options``; the project's
    ``backends/*.yaml`` declared first): each option without effect a ``warning:`` line
    after what it printed; under ``--strict-options`` the map is refused before it
    travels, the list printed, exit 1."""
    declare_contract_files(folder.path for folder in of_working_directory(Path.cwd()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NoEffectWarning)
        try:
            code = command(args)
        except OptionsWithoutEffect as exc:
            print(exc)
            return 1
    for warning in caught:
        if issubclass(warning.category, NoEffectWarning):
            print(f"warning: {warning.message}")
        else:
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    return code


_Read = TypeVar("_Read")


def _read_map(text: str, read: Callable[[Path], _Read]) -> _Read:
    """A map file argument (:func:`_map_file`) as ``read`` reads it; a shipped example's
    errors name it by its name, not by a path into the installed package."""
    path = _map_file(text)
    try:
        return read(path)
    except MapFileError as exc:
        if path != Path(text):
            raise MapFileError(f"{text} (shipped example)", exc.location, exc.problem) from None
        if "/" not in text and not path.exists() and (shipped.maps_dir() / text).is_file():
            shipped_name = f"{exc.problem}; the shipped example goes by its name: {path.stem}"
            raise MapFileError(exc.source, exc.location, shipped_name) from None
        raise


def _map_file(text: str) -> Path:
    """A map file argument: a path, or a name without folder or suffix (``sample``), one
    of the example maps the harness ships, so that an installed harness can show one."""
    path = Path(text)
    if "/" in text or path.suffix:
        return path
    shipped_maps = shipped.maps_dir()
    known = sorted(p.stem for p in shipped_maps.glob("*.yaml"))
    if text not in known:
        raise CliError(
            f"{printable(text)}: no such shipped example map ({', '.join(known)}); give "
            "a map file's path (.yaml, .yml or .json)"
        )
    return shipped_maps / f"{text}.yaml"


def _cmd_map(args: argparse.Namespace) -> int:
    options = _read_map(args.file, load_map)
    request = Request(Action(Action[args.action.upper()]), options)
    frame = wire.encode_request(request)
    decoded = wire.decode_request(frame)
    if decoded != request:
        print("et-harness map: the decoded request differs from the encoded one", file=sys.stderr)
        return 1
    backends = ", ".join(f"{show_name(b.backend_id)} ({len(b.options)})" for b in options.backends)
    count = len(options.backends)
    print(f"{args.file}: valid, {count} backend{'' if count == 1 else 's'}: {backends or 'none'}")
    heed_options(options, _ROUTES[args.action], strict=args.strict_options)
    print(
        f"wire v{wire.WIRE_VERSION} {args.action} request: {len(frame)} bytes, "
        f"decoded back identical"
    )
    if args.json:
        print(json.dumps(readable.to_readable(decoded), ensure_ascii=False, indent=2))
    else:
        for backend in decoded.options.backends:
            print(f"  {show_name(backend.backend_id)}")
            for index, option in enumerate(backend.options):
                print(f"    [{index}] {show_name(option.key)}: {format_value(option.value)}")
    if args.hex:
        for offset in range(0, len(frame), 16):
            print(f"  {offset:08x}  {frame[offset : offset + 16].hex(' ')}")
    return 0


def _cmd_run(args: argparse.Namespace, pytest_args: list[str]) -> int:
    """The shipped suites as pytest runs them where the user is: installed, by package
    name (``--pyargs``), so the rootdir and the configuration stay the user's project's
    (its ``devices/``, ``et_devices_dirs``, ``addopts``), as ``pytest --device`` sees them."""
    import pytest

    return int(pytest.main([*shipped.suite_arguments(), "--device", args.device, *pytest_args]))


def _check_writable(path: Path, option: str = "--json") -> None:
    """Refuse an output path that cannot be written, before the work that fills it."""
    existed = path.exists()
    if existed and not path.is_dir() and not path.is_file():  # opening a FIFO would block
        raise CliError(
            f"{option} {path}: cannot write there (not a regular file); give a writable file path"
        )
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise CliError(
            f"{option} {path}: cannot write there ({exc.strerror}); give a writable file path"
        ) from None
    if not existed:
        path.unlink()


def _cmd_bisect(args: argparse.Namespace, rest: list[str]) -> int:
    from harness.cli.bisect import run_bisect

    if args.json:
        _check_writable(args.json)
    return run_bisect(args, rest[1:] if rest[:1] == ["--"] else rest)


def _cmd_history(args: argparse.Namespace) -> int:
    if args.html:
        _check_writable(args.html, "--html")
    return history_command.run_history(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    from harness.cli.bench import benchmark, format_figures
    from harness.farm.selection import device_items

    if args.json:
        _check_writable(Path(args.json))
    results = []
    for name in device_items(args.device):
        with _opened(name) as (device, runner):
            figures = benchmark(device, runner, args.cases, args.per_case_cases, args.growth_cases)
        print(format_figures(figures), flush=True)
        results.append(figures.as_json())
    output: dict = {"devices": results}
    if args.scaling:
        from harness.cli.bench import run_scaling

        output["scaling"] = run_scaling(device_items(args.device))
        for row in output["scaling"]:
            print(f"suites on {row['devices']} with {row['workers']} workers: {row['wall_s']} s")
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(output, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CliError(
                f"--json {args.json}: writing the figures failed "
                f"({exc.strerror}); the text figures above are complete"
            ) from None
        print(f"figures written to {args.json}")
    return 0


def _opened(name: str) -> AbstractContextManager[tuple[Device, CaseRunner]]:
    """The device of profile ``name`` and a runner on it, closed after the block; a lab
    profile's place held for the block (the user's own, else reserved and handed back)."""
    return doctor.opened(load_profile(name), doctor.SEND_LAB_WAIT_S)


def _cmd_send(args: argparse.Namespace) -> int:
    if args.program is not None:
        return _send_program(args)
    if args.options is not None:
        raise CliError("--options goes with --program; give the map file alone")
    if args.file is None:
        raise CliError("send needs a map file (or --program PTE [--options MAP])")
    options = _read_map(args.file, load_map)
    probes = tuple(args.probe)
    with _opened(args.device) as (_, runner):
        runner.strict_options = args.strict_options
        # et.load's, et.set's and et.get's own rules: which backends a load checks, which
        # names are probes (harness.runner.probes)
        if args.action == "load":
            verdict = runner.load(options, probes=probes)
        elif args.action == "set":
            verdict = runner.set(options, probes=probes)
        else:
            verdict = runner.get(options, probes=probes)
        print(verdict.render())
        if args.action == "get":
            print("\n".join(returned_lines(verdict.report)))
        return 0 if verdict.ok else 1


def _send_program(args: argparse.Namespace) -> int:
    """``send --program PTE [--options MAP]``: every method on every load path, checked."""
    from harness.programs.bundled import read_checked

    if args.file is not None and args.options is not None:
        raise CliError("give the map once: as --options MAP or as the positional file")
    if args.action != "load":
        raise CliError("--program loads the program: --action set / get take no program")
    # A damaged program is refused before a device is brought up; a good one is described.
    print(read_checked(args.program).describe(), flush=True)
    chosen = args.options if args.options is not None else args.file
    # Read before a device is brought up; with the effects its options declare.
    options = _read_map(chosen, read_map_file) if chosen is not None else MapFile(OptionsMap())
    with _opened(args.device) as (_, runner):
        checked = runner.check_program(
            args.program, options, probes=tuple(args.probe), strict=args.strict_options
        )
        print(checked.render())
        return 0 if checked.ok else 1


def _cmd_emu(args: argparse.Namespace) -> int:
    from harness.devices.bring_up import open_device

    profile = load_profile(args.device)
    if profile.emulator is None:
        print(f"et-harness emu: {args.device} is not an emulated device", file=sys.stderr)
        return 2
    if args.lab_address is not None:
        from harness.emulators.lab_board import serve_for_lab

        return serve_for_lab(profile, args.lab_address, args.protocol)
    # Blocked first, so that SIGINT or SIGTERM ends the wait below and the emulator is
    # brought down, never left running.
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    device = open_device(profile)
    try:
        run = getattr(device.emulator, "run", None)
        if run is not None:  # a board held for the harness's link boots for the first client
            run()
        print(f"{profile.name} is up (emulator {profile.emulator}); transport settings:")
        # What the emulator provides: a board's opens its own port (a serial url), which
        # no profile field holds; the others' fields are in the profile already.
        settings = dict(device.profile.settings)
        if device.emulator is not None:
            settings.update(device.emulator.settings)
        for key, value in settings.items():
            print(f"  {key}: {value}")
        print("Ctrl-C brings it down.", flush=True)
        signal.sigwait(stop_signals)
    finally:
        device.close()
        print(f"{profile.name} is down")
    return 0


def _cmd_devices(_: argparse.Namespace) -> int:
    from harness.farm.selection import check_profile

    invalid = 0
    here = Path.cwd()
    found = listing(with_built_in(of_working_directory(here)))
    width = doctor.name_width(entry.name for entry in found)
    for entry in found:
        folder = entry.folder  # by origin: the built-in folder is no path of the user's
        path = folder.path.relative_to(here) if folder.path.is_relative_to(here) else folder.path
        where = "[built-in]" if folder == built_in() else f"[{folder.origin}: {path}]"
        try:
            profile = load_profile(str(entry.path))
            check_profile(profile)
        except ProfileError as exc:  # file names are anyone's: shown printable, as the rest
            print(printable(f"{entry.name:<{width}} INVALID {exc} {where}"))
            invalid += 1
            continue
        kind, description = profile.kind, profile.description.rstrip()
        print(printable(f"{entry.name:<{width}} {kind:<7} {description} {where}"))
    return 1 if invalid else 0


def main(argv: list[str] | None = None) -> int:
    """Run one command; its output may go to a pipe that closes early (``| head``)."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        return code
    except BrokenPipeError:
        # The reader has all it wanted. Point stdout at /dev/null so that the
        # interpreter's own final flush does not fail again, and exit as a tool
        # killed by SIGPIPE does.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 128 + signal.SIGPIPE


def _main(argv: list[str] | None) -> int:
    parser = arguments.parser(__doc__.split("\n\n")[0])
    args, rest = parser.parse_known_args(argv)
    if rest and args.command not in ("run", "bisect", "chaos"):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    handlers = {
        "map": lambda args: _judged(_cmd_map, args),  # the map judged as every door judges it
        "devices": _cmd_devices,
        "bench": _cmd_bench,
        "send": lambda args: _judged(_cmd_send, args),
        "doctor": doctor.run_doctor,
        "emu": _cmd_emu,
        "history": _cmd_history,
        "cache": cache_command.run_cache,
        "lab": lab_command.run_lab,
    }
    try:
        if args.command != "emu" and getattr(args, "device", None) is not None:
            from harness.farm.selection import device_items

            device_items(args.device)  # an empty --device is refused, never read as host
        if args.command == "run":
            return _cmd_run(args, rest)
        if args.command == "bisect":
            return _cmd_bisect(args, rest)
        if args.command == "chaos":
            return chaos_command.run_chaos_command(args, rest[1:] if rest[:1] == ["--"] else rest)
        return handlers[args.command](args)
    except HarnessError as exc:  # usage, infrastructure or a failed check: one line, exit 2
        print(f"et-harness {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"et-harness {args.command}: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
