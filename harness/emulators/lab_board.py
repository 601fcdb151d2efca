"""An emulated SSH board behind a labgrid exporter: ``et-harness emu ssh-emu --lab-address A``.

ssh-emu's sshd listens on address ``A`` of this machine (an exporter host's address,
e.g. ``127.0.0.2`` on one machine, or the host's LAN address), in place of its own
network namespace, so an exporter's ``NetworkService`` can name it as it is. What a lab
admin needs is printed: the exporter config's ``NetworkService`` stanza, the
known_hosts line to publish, and the client key the board accepts. Until Ctrl-C.
"""

from __future__ import annotations

import signal
import sys

from harness.config.profile import DeviceProfile
from harness.emulators.ssh import Isolation, SshEmulator
from harness.lifecycle.cache import cache_root
from harness.untrusted.value_rules import ValueRuleError, check_host


def lab_texts(board: SshEmulator, group: str) -> list[str]:
    """What to put where: exporter config, known_hosts, key."""
    return [
        "exporter config (a Jinja2 template: no line may start with '#'):",
        f"{group}:",
        "  NetworkService:",
        f"    address: {board.host}",
        f"    port: {board.port}",
        f"    username: {board.user}",
        "known_hosts line (publish it; a lab profile's transport.known_hosts names the file):",
        f"{board.known_hosts_name} {board.host_public_key}",
        f"client key (this board's own; see docs/device-farm.md for one key per place): "
        f"{board.client_key}",
    ]


def serve_for_lab(profile: DeviceProfile, address: str) -> int:
    """Run ``profile``'s SSH board on ``address`` until SIGINT or SIGTERM."""
    if profile.kind != "ssh":
        print(
            f"et-harness emu: --lab-address: {profile.name} is a {profile.kind} device; "
            "only ssh-emu can be exposed on a lab address (an emulated MCU board is exported "
            "as a RawSerialPort of its pty: python -m harness.emulators.labgrid_lab)",
            file=sys.stderr,
        )
        return 2
    try:
        check_host(address)
    except ValueRuleError as exc:
        print(f"et-harness emu: --lab-address: {exc}", file=sys.stderr)
        return 2
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    directory = cache_root() / "emulators" / f"lab-{profile.name}-{address}"
    with SshEmulator(
        directory / "sshd",
        alias=f"{profile.name}-lab",
        isolation=Isolation.LOOPBACK,
        listen_host=address,
    ) as board:
        print(f"{profile.name} is up on {board.host}:{board.port}")
        for line in lab_texts(board, f"{profile.name.replace('-', '_')}"):
            print(line)
        print("Ctrl-C brings it down.", flush=True)
        signal.sigwait(stop_signals)
    print(f"{profile.name} is down")
    return 0
