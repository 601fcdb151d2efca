"""Where the harness's own files are: agent sources, SDK lock, built-in profiles, suites, maps.

Installed from a wheel, they are package data: the wheel puts the repository's
``agent/``, ``devices/`` and ``examples/maps/`` under ``harness/_shipped/`` and its
``suites/`` in the package ``harness.suites`` (pyproject.toml, ``[tool.hatch.build]``).
Run from the harness's own checkout (an editable install, or ``PYTHONPATH``), the same
folders are the checkout's own, beside the ``harness`` package. Either way they are
found from ``importlib.resources.files("harness")``, here and nowhere else, and only
when asked for: importing this module reads nothing from disk.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from harness.errors import UsageError

__all__ = [
    "BrokenInstallation",
    "agent_dir",
    "checkout",
    "devices_dir",
    "import_root",
    "maps_dir",
    "suites_dir",
]

PACKAGE_DATA = "_shipped"  # the wheel's folder for what is not Python


class BrokenInstallation(UsageError):
    """A file the harness ships is missing: the installation is incomplete."""


@functools.cache
def _package() -> Path:
    return Path(str(resources.files("harness")))


@functools.cache
def checkout() -> Path | None:
    """The harness's own checkout when it runs from one, else None (an installed wheel)."""
    if (_package() / PACKAGE_DATA).is_dir():
        return None
    top = _package().parent
    return top if (top / "pyproject.toml").is_file() and (top / "agent").is_dir() else None


def _data(*parts: str) -> Path:
    top = checkout()
    return _existing((top if top is not None else _package() / PACKAGE_DATA).joinpath(*parts))


def _existing(path: Path) -> Path:
    if not path.exists():
        raise BrokenInstallation(
            f"the harness's installation is incomplete: {path} is missing; reinstall it "
            "(pip install --force-reinstall executorch-hil-harness)"
        )
    return path


def import_root() -> Path:
    """The folder the ``harness`` package is imported from: a child Python that must import
    the harness puts it on its ``PYTHONPATH``."""
    return _package().parent


def agent_dir() -> Path:
    """The device agent's sources: ``runtime/``, ``codec/``, ``cmake/``, ``mcu/``, the lock."""
    return _data("agent")


def devices_dir() -> Path:
    """The built-in device profiles (``host.yaml``, the emulated devices, the examples)."""
    return _data("devices")


def maps_dir() -> Path:
    """The example options maps (``sample.yaml``, ...)."""
    return _data("examples", "maps")


def suite_arguments() -> list[str]:
    """What pytest is given to run the device suites: their folder in a checkout, else the
    installed package by name (``--pyargs``), so the rootdir stays the user's project's."""
    return [str(suites_dir())] if checkout() is not None else ["--pyargs", "harness.suites"]


def suites_dir() -> Path:
    """The device suites: the package ``harness.suites`` once installed."""
    return _data("suites") if checkout() is not None else _existing(_package() / "suites")
