"""Who holds a place: :class:`LabIdentity`, one harness process as a labgrid owner
(``HOST/USER-pidPID-START``): this process, the holder a coordinator names when it is a
harness process, and whether that process is gone.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from dataclasses import dataclass

from harness.lifecycle.reap import start_time

_IDENTITY = re.compile(
    r"(?P<host>[^/]+)/(?P<user>.+)-pid(?P<pid>[0-9]{1,10})-(?P<start>[0-9]{1,20})"
)


@dataclass(frozen=True)
class LabIdentity:
    """One process as a labgrid owner: ``HOST/USER-pidPID-START``."""

    host: str
    user: str
    pid: int
    start: int

    @classmethod
    def this_process(cls) -> LabIdentity:
        """This process, with the host and user labgrid itself would use.

        Those are LG_HOSTNAME and LG_USERNAME when set.
        """
        pid = os.getpid()
        host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
        user = os.environ.get("LG_USERNAME") or getpass.getuser()
        return cls(host, user, pid, start_time(pid) or 0)

    @classmethod
    def parse(cls, owner: str) -> LabIdentity | None:
        """The identity in a coordinator's ``acquired: HOST/USER`` field, if it is one of ours."""
        match = _IDENTITY.fullmatch(owner)
        if match is None:
            return None
        return cls(match["host"], match["user"], int(match["pid"]), int(match["start"]))

    @property
    def username(self) -> str:
        return f"{self.user}-pid{self.pid}-{self.start}"

    @property
    def owner(self) -> str:
        return f"{self.host}/{self.username}"

    def environment(self) -> dict[str, str]:
        return {"LG_HOSTNAME": self.host, "LG_USERNAME": self.username}

    def is_gone_from(self, host: str) -> bool:
        """Whether this identity is a process of ``host`` that no longer runs."""
        return self.host == host and start_time(self.pid) != self.start
