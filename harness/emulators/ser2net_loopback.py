"""``ser2net`` as a labgrid exporter starts it, but listening on one address only.

A labgrid exporter runs ser2net for a serial port with an accepter of the form
``telnet(rfc2217,mode=server),tcp,PORT``, which listens on every interface. The
emulated lab (:mod:`harness.emulators.labgrid_lab`) puts a ``ser2net`` script
early on the exporter's PATH that runs this module: it rewrites that accepter to
``tcp,$ET_SER2NET_BIND,PORT`` and executes Debian's ``/usr/sbin/ser2net`` with
the arguments otherwise unchanged (``-v`` included, which the exporter checks).
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys

SER2NET = "/usr/sbin/ser2net"
_ACCEPTER = re.compile(r"(.*accepter: telnet\(rfc2217,mode=server\)),tcp,([0-9]{1,5})")


def rewrite(argv: list[str], bind: str) -> list[str]:
    """``argv`` with each rfc2217 accepter bound to ``bind`` (an IP address)."""
    ipaddress.ip_address(bind)  # only an address: it goes into ser2net's own syntax
    return [_ACCEPTER.sub(rf"\1,tcp,{bind},\2", arg) for arg in argv]


def main(argv: list[str]) -> int:
    bind = os.environ.get("ET_SER2NET_BIND", "127.0.0.1")
    os.execv(SER2NET, [SER2NET, *rewrite(argv, bind)])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
