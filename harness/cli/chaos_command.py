"""``et-harness chaos --duration S --seed N [--device D] [-- PYTEST ARGS]``: the device
suites on the emulated devices for S seconds while seeded faults are injected, then the
invariants printed with the seed (exit 1 if one broke); ``--check FOLDER`` checks a
finished run's invariants again (docs/chaos.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.chaos.schedule import MEAN_GAP_S, MIN_ROUND_S
from harness.cli.command_error import CliError

MAX_DURATION_S = 24 * 3600
DEFAULT_FOLDER = Path("results/chaos")


def _duration(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < seconds <= MAX_DURATION_S:
        raise argparse.ArgumentTypeError(
            f"{text}: give more than 0 and at most {MAX_DURATION_S} seconds"
        )
    return seconds


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= seed < 2**63:
        raise argparse.ArgumentTypeError(f"{seed} is not within 0..2**63-1")
    return seed


def add_parser(commands: Any) -> None:
    """The ``chaos`` subcommand's options, on ``et-harness``'s subparsers."""
    cmd = commands.add_parser(
        "chaos",
        help="the suites on the emulated devices under seeded faults; invariants checked",
        description=__doc__.split("\n\n")[0],
    )
    cmd.add_argument("--duration", type=_duration, help="seconds of chaos (e.g. 600)")
    cmd.add_argument("--seed", type=_seed, help="the seed the fault schedule is drawn from")
    cmd.add_argument(
        "--fault-every",
        type=_duration,
        default=MEAN_GAP_S,
        metavar="SECONDS",
        help=f"one fault per this many seconds, on average (default: {MEAN_GAP_S:g})",
    )
    cmd.add_argument(
        "--min-round",
        type=_duration,
        default=MIN_ROUND_S,
        metavar="SECONDS",
        help="a later round starts only with this much of the run's time left, for its "
        f"devices to come up (default: {MIN_ROUND_S:g})",
    )
    cmd.add_argument(
        "--device",
        default="tag:emulated",
        help="the devices: profile names, a,b,c or tag:NAME (default: tag:emulated)",
    )
    cmd.add_argument(
        "--results-dir",
        type=Path,
        default=DEFAULT_FOLDER,
        help=f"the run's folder: its rounds, logs and chaos.json (default: {DEFAULT_FOLDER})",
    )
    cmd.add_argument(
        "--check",
        type=Path,
        metavar="FOLDER",
        help="check a finished chaos run's invariants again from its folder; run nothing",
    )


def run_chaos_command(args: argparse.Namespace, pytest_args: list[str]) -> int:
    from harness.chaos.report import load_record
    from harness.chaos.run import ChaosSettings, run_chaos
    from harness.farm.selection import select_profiles

    if args.check is not None:
        record = load_record(args.check)
    else:
        if args.duration is None or args.seed is None:
            raise CliError("chaos needs --duration SECONDS and --seed N (or --check FOLDER)")
        profiles = select_profiles(args.device)
        settings = ChaosSettings(
            args.seed, args.duration, args.device, profiles, args.results_dir.absolute(),
            every_s=args.fault_every, min_round_s=args.min_round, pytest_args=tuple(pytest_args),
        )  # fmt: skip
        record = run_chaos(settings, lambda line: print(line, flush=True))
    invariants = record.invariants()
    for line in record.lines(invariants):
        print(line)
    return 0 if all(invariant.held for invariant in invariants) else 1
