"""``et-harness lab quarantine list|clear PLACE``: the places of a labgrid lab out of
service (each with why, and the operator's own comment it keeps), and putting one back
in service with its own comment restored (:mod:`harness.lab.quarantine`)."""

from __future__ import annotations

import argparse
from typing import Any

from harness.cli.command_error import CliError
from harness.extras import LAB


def add_parser(commands: Any) -> None:
    """The ``lab`` subcommand's options, on ``et-harness``'s subparsers."""
    cmd = commands.add_parser(
        "lab",
        help="a labgrid lab's places out of service: list them, clear one",
        description=__doc__.split("\n\n")[0],
    )
    topics = cmd.add_subparsers(dest="topic", required=True)
    quarantine = topics.add_parser("quarantine", help="the places quarantined lab-wide")
    quarantine.add_argument("action", choices=["list", "clear"])
    quarantine.add_argument("place", nargs="?", help="with clear: the place to put back")
    quarantine.add_argument(
        "-x",
        "--coordinator",
        help="the coordinator, HOST:PORT (default: $LG_COORDINATOR, else labgrid's default)",
    )


def run_lab(args: argparse.Namespace) -> int:
    from harness.lab import quarantine
    from harness.lab.client_session import LabSession
    from harness.lab.identity import LabIdentity
    from harness.profiles.lab_setting import HEALTH_TAG, HEALTHY

    if args.action == "clear" and args.place is None:
        raise CliError("lab quarantine clear needs the place: lab quarantine clear PLACE")
    if args.action == "list" and args.place is not None:
        raise CliError(f"lab quarantine list takes no place (clear {args.place} clears it)")
    missing = LAB.missing("et-harness lab")
    if missing is not None:
        raise CliError(missing)
    lab = LabSession.of(args.coordinator, LabIdentity.this_process())
    if args.action == "clear":
        restored = quarantine.clear(lab, args.place)
        kept = f"comment back to: {restored}" if restored else "no comment of its own"
        print(f"{args.place}: {HEALTH_TAG}={HEALTHY}, {kept}")
        return 0
    states = quarantine.out_of_service(lab)
    for state in states:
        print(f"{state.name}  {HEALTH_TAG}={quarantine.health_of(state)}")
        print(f"  {state.comment or '(no comment)'}")
    print(f"{len(states)} place(s) out of service at {lab.coordinator}")
    return 0
