"""Which device profiles a run uses: ``--device a,b,c``, ``all``, ``tag:NAME``, paths.

Names, ``all`` and ``tag:`` look in the run's device folders: the project's own
(``--devices-dir``, ``et_devices_dirs``, ``devices/`` beside the rootdir), then the
built-in profiles (:mod:`harness.profiles.device_folders`); items ending in ``.yaml`` or
``.yml``, or containing ``/``, are paths to profile files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.devices.bring_up import check_transport_settings
from harness.errors import UsageError
from harness.profiles.device_folders import (
    DeviceFolder,
    listing,
    of_working_directory,
    with_built_in,
)
from harness.profiles.device_profile import DeviceProfile, load_profile
from harness.profiles.lab_setting import for_transport_checks
from harness.untrusted.reading import brief_plain

ALL = "all"
TAG_PREFIX = "tag:"
DEFAULT_DEVICE = "host"  # when --device is not given at all
_TAGS_SHOWN = 12  # an unknown tag's error lists this many of those present


class DeviceSelectionError(ValueError, UsageError):
    """``--device`` names no profile, an unknown one, or two profiles with one name."""


def device_items(spec: str | None) -> list[str]:
    """The comma-separated items of ``--device``; None (not given) means the default
    device, but an empty value is refused rather than read as the default."""
    if spec is None:
        return [DEFAULT_DEVICE]
    items = [item.strip() for item in spec.split(",") if item.strip()]
    if not items:
        raise DeviceSelectionError(
            f"--device is empty ({spec!r}); give profile names (host,ssh-emu), a path to a "
            f"YAML profile, 'all' or 'tag:NAME', or leave --device out for {DEFAULT_DEVICE}"
        )
    return items


def select_profiles(
    spec: str | None, folders: Sequence[DeviceFolder] | Path | None = None
) -> tuple[DeviceProfile, ...]:
    """The profiles ``spec`` selects, in the order given, each once (see :func:`device_items`).

    Names are looked up in ``folders``: the folders given; one folder (``--devices-dir``:
    that folder alone); None: the working directory's project's, then the built-in one.

    Raises :class:`DeviceSelectionError` (or :class:`~harness.profiles.device_profile.ProfileError`
    for a malformed profile) with a message saying what to change.
    """
    if folders is None:
        folders = with_built_in(of_working_directory(Path.cwd()))
    elif isinstance(folders, Path):
        if not folders.is_dir():
            raise DeviceSelectionError(f"--devices-dir {folders}: no such directory")
        folders = (DeviceFolder(folders, "--devices-dir"),)
    chosen: dict[str, DeviceProfile] = {}
    for item in device_items(spec):
        for profile in _expand(item, folders):
            known = chosen.get(profile.name)
            if known is not None and known.path != profile.path:
                raise DeviceSelectionError(
                    f"two profiles are named {profile.name!r}: {known.path} and {profile.path}; "
                    "device names must be unique in a run (set 'name:' in one of them)"
                )
            chosen.setdefault(profile.name, profile)
    for profile in chosen.values():
        check_profile(profile)
    return tuple(chosen.values())


def check_profile(profile: DeviceProfile) -> None:
    """Refuse a profile whose transport fields are wrong, before anything starts.

    A lab profile is checked without its labgrid setting, with stand-ins for the
    address its place will give (:func:`harness.profiles.lab_setting.for_transport_checks`).
    """
    check_transport_settings(for_transport_checks(profile))


def _expand(item: str, folders: Sequence[DeviceFolder]) -> list[DeviceProfile]:
    where = ", ".join(str(folder.path) for folder in folders) or "no device folder"
    if item == ALL:
        profiles = _every(folders)
        if not profiles:
            raise DeviceSelectionError(f"--device all: {where} hold no *.yaml profiles")
        return profiles
    if item.startswith(TAG_PREFIX):
        tag = item[len(TAG_PREFIX) :]
        profiles = _every(folders)
        tagged = [p for p in profiles if tag in p.tags]
        if not tagged:
            present = sorted({t for p in profiles for t in p.tags})
            shown = ", ".join(brief_plain(t) for t in present[:_TAGS_SHOWN])
            more = f" and {len(present) - _TAGS_SHOWN} more" if len(present) > _TAGS_SHOWN else ""
            raise DeviceSelectionError(
                f"--device {item}: no profile in {where} has tag {tag!r}; "
                f"tags there: {shown or 'none'}{more}"
            )
        return tagged
    if item.endswith((".yaml", ".yml")) or "/" in item:
        return [load_profile(item)]
    found = {entry.name: entry for entry in listing(folders)}
    if item not in found:
        raise DeviceSelectionError(
            f"unknown device {item!r}: no {item}.yaml in {where}; known devices: "
            f"{', '.join(found) or 'none'} (or 'all', 'tag:NAME', or a path to a YAML profile)"
        )
    return [load_profile(str(found[item].path))]


def _every(folders: Sequence[DeviceFolder]) -> list[DeviceProfile]:
    return [load_profile(str(entry.path)) for entry in listing(folders)]
