"""The emulated lab's command line, ``python -m harness.emulators.emulated_lab [PLACES
[SSH_BOARDS [PHONES [LINUX_BOARDS]]]]``: the lab of :mod:`harness.emulators.labgrid_lab`
on 127.0.0.1:20408 with its SSH files in ``LAB_FILES`` (what the shipped lab profiles
name), its places printed, until Ctrl-C (docs/device-farm.md, "Worked example")."""

from __future__ import annotations

import argparse
import signal
import sys

from harness.emulators.lab_places import BOOT_TAGS, SSH_TAGS, TAGS
from harness.emulators.labgrid_lab import LAB_FILES, running_lab


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m harness.emulators.emulated_lab",
        description="Run the emulated labgrid lab on loopback, coordinator on 127.0.0.1:20408 "
        "(the address the lab profiles name), until Ctrl-C (docs/device-farm.md).",
    )
    parser.add_argument("places", nargs="?", type=int, default=2, help="MCU places (default: 2)")
    parser.add_argument(
        "ssh_boards", nargs="?", type=int, default=1, help="SSH board places (default: 1)"
    )
    parser.add_argument("phones", nargs="?", type=int, default=1, help="phone places (default: 1)")
    parser.add_argument(
        "linux_boards", nargs="?", type=int, default=0, help="Linux boards that boot (default: 0)"
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    with running_lab(
        args.places, 20408, args.ssh_boards, LAB_FILES, args.phones, args.linux_boards
    ) as lab:
        print(f"coordinator {lab.coordinator}")
        for place in lab.places:
            print(
                f"place {place.name}: exporter {place.exporter} on {place.host}, "
                f"board {place.board.name} on {place.board.pty}, tags "
                + " ".join(f"{k}={v}" for k, v in TAGS.items())
            )
        for name, exporter, ssh, tags in (
            *((p.name, p.exporter, p.board, SSH_TAGS) for p in lab.ssh_places),
            *((p.name, p.exporter, p.board.board, BOOT_TAGS) for p in lab.linux_board_places),
        ):
            print(
                f"place {name}: exporter {exporter}, NetworkService "
                f"{ssh.host}:{ssh.port} user {ssh.user}, tags "
                + " ".join(f"{k}={v}" for k, v in tags.items())
            )
        for android in lab.android_places:
            print(
                f"place {android.name}: exporter {android.exporter}, phone "
                f"{android.phone.name}, tags "
                + " ".join(f"{k}={v}" for k, v in android.tags.items())
            )
        print(f"SSH host keys in {lab.known_hosts}, client key {lab.client_key}")
        print("Ctrl-C to stop", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    return 0


def run(argv: list[str]) -> int:
    """:func:`main` with SIGINT and SIGTERM kept for its ``sigwait`` (the lab's threads
    never see them)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
