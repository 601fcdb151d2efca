"""Where device names are looked up: the user's folders of profiles, then the built-in one.

A project that installed the harness keeps its own profiles in ``devices/`` beside its
rootdir, or in the folders its pytest configuration names (``et_devices_dirs``, relative
to the configuration file), or in a folder ``--devices-dir`` names. A name is found in
the first folder that has it, in that order, the harness's built-in profiles last: a
project's ``host.yaml`` stands in for the built-in one. ``et-harness devices`` lists every
name with the folder it comes from.
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import shipped
from harness.profiles.validator import refuse

__all__ = [
    "INI_OPTION",
    "DeviceFolder",
    "FoundProfile",
    "built_in",
    "listing",
    "of_project",
    "of_working_directory",
    "with_built_in",
]

INI_OPTION = "et_devices_dirs"
PROJECT_FOLDER = "devices"  # beside the project's rootdir
_CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


@dataclass(frozen=True)
class DeviceFolder:
    """A folder of ``*.yaml`` profiles and what named it (shown by ``et-harness devices``)."""

    path: Path
    origin: str  # "built-in", "the project's devices/", "et_devices_dirs in pytest.ini", ...


@dataclass(frozen=True)
class FoundProfile:
    """A device name, its profile file and the folder it was found in."""

    name: str
    path: Path
    folder: DeviceFolder


def built_in() -> DeviceFolder:
    """The profiles the harness ships: host and the emulated devices, and the examples."""
    return DeviceFolder(shipped.devices_dir(), "built-in")


def with_built_in(folders: Iterable[DeviceFolder]) -> tuple[DeviceFolder, ...]:
    """``folders`` that exist, each once, then the built-in folder (the harness's own checkout
    is a project whose ``devices/`` is the built-in folder: it is called built-in)."""
    shipped_folder = built_in()
    chosen = {shipped_folder.path.resolve(): shipped_folder}
    for folder in folders:
        if folder.path.is_dir():
            chosen.setdefault(folder.path.resolve(), folder)
    return (*list(chosen.values())[1:], shipped_folder)


def listing(folders: Sequence[DeviceFolder]) -> list[FoundProfile]:
    """Every name the folders give, each from the first folder that has it, sorted."""
    found: dict[str, FoundProfile] = {}
    for folder in folders:
        for path in sorted(folder.path.glob("*.yaml")):
            found.setdefault(path.stem, FoundProfile(path.stem, path, folder))
    return [found[name] for name in sorted(found)]


def of_project(rootdir: Path, inifile: Path | None, ini_dirs: Sequence[str]) -> list[DeviceFolder]:
    """A project's own folders: those its pytest configuration names (``et_devices_dirs``,
    relative to ``inifile``), then ``devices/`` beside its ``rootdir``."""
    base = inifile.parent if inifile is not None else rootdir
    shown = inifile.name if inifile is not None else "the pytest configuration"
    named = [DeviceFolder(base / entry, f"{INI_OPTION} in {shown}") for entry in ini_dirs]
    for folder in named:
        if not folder.path.is_dir():  # a typo would hide every profile in it
            raise refuse(
                f"{inifile or rootdir}:",
                INI_OPTION,
                f"{folder.path} is not a folder; create it, or correct or drop the entry",
            )
    return [*named, DeviceFolder(rootdir / PROJECT_FOLDER, f"the project's {PROJECT_FOLDER}/")]


def of_working_directory(start: Path) -> list[DeviceFolder]:
    """The folders of the project ``start`` is in, found as pytest finds a rootdir without
    arguments: the nearest folder upwards with a pytest configuration file (for the CLI)."""
    for folder in (start, *start.parents):
        for name in _CONFIG_FILES:
            config = folder / name
            if config.is_file():
                dirs = _ini_dirs(config)
                if dirs is not None:
                    return of_project(folder, config, dirs)
    return of_project(start, None, ())


def _ini_dirs(config: Path) -> list[str] | None:
    """``et_devices_dirs`` of a pytest configuration file; None if it holds no pytest section."""
    try:
        if config.suffix == ".toml":
            tool = tomllib.loads(config.read_text("utf-8")).get("tool")  # any TOML value
            table = tool.get("pytest") if isinstance(tool, dict) else None
            options = table.get("ini_options") if isinstance(table, dict) else None
            if not isinstance(options, dict):
                return None
            value = options.get(INI_OPTION, [])
            return [str(v) for v in value] if isinstance(value, list) else str(value).split()
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(config.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, configparser.Error):
        return None
    section = "tool:pytest" if config.name == "setup.cfg" else "pytest"
    if not parser.has_section(section):
        return [] if config.name.endswith("pytest.ini") else None  # pytest.ini always counts
    return parser.get(section, INI_OPTION, fallback="").split()
