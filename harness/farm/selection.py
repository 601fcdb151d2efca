"""Which device profiles a run uses: ``--device a,b,c``, ``all``, ``tag:NAME``, paths.

Names, ``all`` and ``tag:`` look in one profiles directory (the repository's
``devices/`` unless ``--devices-dir`` says otherwise); items ending in ``.yaml``
or ``.yml``, or containing ``/``, are paths to profile files.
"""

from __future__ import annotations

from pathlib import Path

from harness.config.profile import DEVICES_DIR, DeviceProfile, load_profile
from harness.devices.bring_up import check_transport_settings
from harness.errors import UsageError
from harness.lab.labgrid import for_transport_checks
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


def select_profiles(spec: str | None, devices_dir: Path = DEVICES_DIR) -> tuple[DeviceProfile, ...]:
    """The profiles ``spec`` selects, in the order given, each once (see :func:`device_items`).

    Raises :class:`DeviceSelectionError` (or :class:`~harness.config.profile.ProfileError`
    for a malformed profile) with a message saying what to change.
    """
    chosen: dict[str, DeviceProfile] = {}
    for item in device_items(spec):
        for profile in _expand(item, devices_dir):
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
    address its place will give (:func:`harness.lab.labgrid.for_transport_checks`).
    """
    check_transport_settings(for_transport_checks(profile))


def _expand(item: str, devices_dir: Path) -> list[DeviceProfile]:
    if item == ALL:
        profiles = _directory(devices_dir)
        if not profiles:
            raise DeviceSelectionError(f"--device all: {devices_dir} holds no *.yaml profiles")
        return profiles
    if item.startswith(TAG_PREFIX):
        tag = item[len(TAG_PREFIX) :]
        profiles = _directory(devices_dir)
        tagged = [p for p in profiles if tag in p.tags]
        if not tagged:
            present = sorted({t for p in profiles for t in p.tags})
            shown = ", ".join(brief_plain(t) for t in present[:_TAGS_SHOWN])
            more = f" and {len(present) - _TAGS_SHOWN} more" if len(present) > _TAGS_SHOWN else ""
            raise DeviceSelectionError(
                f"--device {item}: no profile in {devices_dir} has tag {tag!r}; "
                f"tags there: {shown or 'none'}{more}"
            )
        return tagged
    if item.endswith((".yaml", ".yml")) or "/" in item:
        return [load_profile(item)]
    if not devices_dir.is_dir():
        raise DeviceSelectionError(
            f"--devices-dir {devices_dir}: no such directory, where device {item!r} would be"
        )
    path = devices_dir / f"{item}.yaml"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in devices_dir.glob("*.yaml")))  # as et-harness
        raise DeviceSelectionError(
            f"unknown device {item!r}: no {path}; known devices: {names or 'none'} "
            "(or 'all', 'tag:NAME', or a path to a YAML profile)"
        )
    return [load_profile(str(path))]


def _directory(devices_dir: Path) -> list[DeviceProfile]:
    if not devices_dir.is_dir():
        raise DeviceSelectionError(f"--devices-dir {devices_dir}: no such directory")
    return [load_profile(str(path)) for path in sorted(devices_dir.glob("*.yaml"))]
