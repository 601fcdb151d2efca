"""``et-harness``: the harness for people, outside pytest.

- ``et-harness map FILE``: validate a map file, encode it as a wire request,
  decode it again and print it (with ``--hex``, the bytes too);
- ``et-harness run [--device NAME] [PYTEST ARGS]``: run the device suites on a
  device and print a per-backend summary;
- ``et-harness devices``: list the device profiles.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness import wire
from harness.check import format_value
from harness.mapfile import MapFileError, load_map
from harness.messages import Action, Request
from harness.profile import ProfileError, load_profile, profile_names

REPO_ROOT = Path(__file__).resolve().parent.parent
SUITES_DIR = REPO_ROOT / "suites"


def _cmd_map(args: argparse.Namespace) -> int:
    try:
        options = load_map(args.file)
    except (MapFileError, OSError) as exc:
        print(f"et-harness map: {exc}", file=sys.stderr)
        return 2
    request = Request(Action(Action[args.action.upper()]), options)
    frame = wire.encode_request(request)
    decoded = wire.decode_request(frame)
    if decoded != request:
        print("et-harness map: the decoded request differs from the encoded one", file=sys.stderr)
        return 1
    backends = ", ".join(f"{b.backend_id} ({len(b.options)})" for b in options.backends)
    print(f"{args.file}: valid, {len(options.backends)} backends: {backends or 'none'}")
    print(f"wire v{wire.WIRE_VERSION} {args.action} request: {len(frame)} bytes, "
          f"decoded back identical")
    if args.json:
        print(json.dumps(wire.to_readable(decoded), ensure_ascii=False, indent=2))
    else:
        for backend in decoded.options.backends:
            print(f"  {backend.backend_id}")
            for index, option in enumerate(backend.options):
                print(f"    [{index}] {option.key}: {format_value(option.value)}")
    if args.hex:
        for offset in range(0, len(frame), 16):
            print(f"  {offset:08x}  {frame[offset:offset + 16].hex(' ')}")
    return 0


def _cmd_run(args: argparse.Namespace, pytest_args: list[str]) -> int:
    import pytest

    try:
        load_profile(args.device)
    except ProfileError as exc:
        print(f"et-harness run: {exc}", file=sys.stderr)
        return 2
    return int(pytest.main([str(SUITES_DIR), "--device", args.device, *pytest_args]))


def _cmd_bench(args: argparse.Namespace) -> int:
    from harness.benchmark import benchmark, format_figures
    from harness.device import open_device
    from harness.runner import CaseRunner

    results = []
    for name in args.device.split(","):
        device = open_device(load_profile(name))
        runner = CaseRunner(device.start_link, device.program_for)
        try:
            figures = benchmark(device, runner, args.cases, args.per_case_cases, args.growth_cases)
        finally:
            runner.close()
            device.close()
        print(format_figures(figures), flush=True)
        results.append(figures.as_json())
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"figures written to {args.json}")
    return 0


def _cmd_devices(_: argparse.Namespace) -> int:
    for name in profile_names():
        profile = load_profile(name)
        print(f"{name:<12} {profile.transport:<7} {profile.description}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="et-harness", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    map_cmd = commands.add_parser("map", help="validate, encode and decode a map file")
    map_cmd.add_argument("file", help="YAML or JSON map file (docs/map-files.md)")
    map_cmd.add_argument("--action", choices=["load", "set", "get"], default="load",
                         help="the request to encode the map into (default: load)")
    map_cmd.add_argument("--hex", action="store_true", help="also print the bytes")
    map_cmd.add_argument("--json", action="store_true",
                         help="print the decoded request in the wire format's readable form")

    run_cmd = commands.add_parser(
        "run", help="run the device suites on a device (other arguments go to pytest)"
    )
    run_cmd.add_argument("--device", default="host", help="profile name or YAML path")

    commands.add_parser("devices", help="list device profiles")

    bench_cmd = commands.add_parser("bench", help="measure per-case cost (docs/performance.md)")
    bench_cmd.add_argument("--device", default="host", help="comma-separated profiles")
    bench_cmd.add_argument("--cases", type=int, default=300, help="session-mode cases")
    bench_cmd.add_argument("--per-case-cases", type=int, default=30,
                           help="cases done the per-case way (push, run one-shot, pull)")
    bench_cmd.add_argument("--growth-cases", type=int, default=30,
                           help="cases per map shape when measuring growth")
    bench_cmd.add_argument("--json", help="write all figures to this JSON file")

    args, rest = parser.parse_known_args(argv)
    if args.command == "run":
        return _cmd_run(args, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return {"map": _cmd_map, "devices": _cmd_devices, "bench": _cmd_bench}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
