"""``ser2net`` as a labgrid exporter starts it, but listening on one address only.

A labgrid exporter runs ser2net for a serial port with an accepter of the form
``telnet(rfc2217,mode=server),tcp,PORT``, which listens on every interface. The
emulated lab (:mod:`harness.emulators.labgrid_lab`) puts a ``ser2net`` script
early on the exporter's PATH that runs this module: it rewrites that accepter to
``tcp(nodelay=true),$ET_SER2NET_BIND,PORT`` and executes Debian's ``/usr/sbin/ser2net``
with the arguments otherwise unchanged (``-v`` included, which the exporter checks)
but one more option, ``chardelay: false``. Both are about latency: ser2net's TCP
side otherwise sends with Nagle's algorithm (so each small report waits for the
client's delayed ACK, ~40 ms) and holds serial input back until the line is quiet
(up to 20 ms). The harness's request/report frames are small: stock, a HELLO round
trip over the place's RFC 2217 port takes ~50 ms; with these, ~12 ms, against ~7 ms
straight on the pty (docs/performance.md). A lab's exporters can use this wrapper
as it is for the same gain.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import sys
from pathlib import Path

SER2NET = "/usr/sbin/ser2net"
_ACCEPTER = re.compile(r"(.*accepter: telnet\(rfc2217,mode=server\)),tcp,([0-9]{1,5})")


def rewrite(argv: list[str], bind: str) -> list[str]:
    """``argv`` with each rfc2217 accepter bound to ``bind`` (an IP address) without
    Nagle's algorithm, and without ser2net's character delay."""
    ipaddress.ip_address(bind)  # only an address: it goes into ser2net's own syntax
    rewritten = [_ACCEPTER.sub(rf"\1,tcp(nodelay=true),{bind},\2", arg) for arg in argv]
    if "  options:" in rewritten:
        at = rewritten.index("  options:") + 1
        rewritten[at:at] = ["-Y", "    chardelay: false"]
    return rewritten


def wrapper_folder(directory: Path) -> Path:
    """A folder with a ``ser2net`` that runs the harness's loopback one (for the PATH of
    the exporters, which start ser2net for a serial port at each acquisition)."""
    wrapper_dir = directory / "bin"
    wrapper_dir.mkdir()
    wrapper = wrapper_dir / "ser2net"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec {shlex.quote(sys.executable)} -m harness.emulators.ser2net_loopback "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper_dir


def main(argv: list[str]) -> int:
    bind = os.environ.get("ET_SER2NET_BIND", "127.0.0.1")
    os.execv(SER2NET, [SER2NET, *rewrite(argv, bind)])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
