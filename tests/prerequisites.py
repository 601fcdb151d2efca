"""What some tests need from the machine; ci/setup.sh installs all of it.

A missing prerequisite fails the test with what to install, rather than skipping it:
a skip would let a machine without, say, adb pass CI while adb-emu went untested.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require(*tools: str, root: bool = False) -> None:
    """Fail the calling test unless every tool is on PATH (and, if asked, we are root)."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: run `bash ci/setup.sh` to install them")
    if root and os.geteuid() != 0:
        pytest.fail("needs root (namespaces, mounts, a device user): run the tests as root")
