"""Where an acquired labgrid place's device is: its resources, read as untrusted input.

``labgrid-client -p PLACE env`` prints the acquired place's resources as YAML::

    targets:
      board-7:
        resources:
        - NetworkService: {address: 127.0.0.2, port: 2222, username: etdevice}
        - NetworkSerialPort: {name: RawSerialPort, host: 127.0.0.2, port: 41193, speed: 115200}
        - NetworkPowerPort: {model: simplerest, host: "http://...", index: 0}

That text comes from the lab (exporters describe their own resources), so it is
read like a profile: bounded strict YAML, and every value the transport uses is
checked with the profile's own rules (:mod:`harness.untrusted.value_rules`). The device
kind (its registry entry's ``lab``, :mod:`harness.config.kinds`) then fills the
transport fields a lab profile leaves out, through its module's ``lab_settings``:
``host``, ``port`` and ``user`` of an SSH device from its ``NetworkService``;
``url`` (and ``baudrate``) of a serial device from its ``NetworkSerialPort`` (the
ser2net RFC 2217 port the exporter opens at each acquisition, so no fixed URL could
be right); ``serial``, ``server_host`` and ``server_port`` of an Android device from
the place's tags ``adb_serial`` and ``adb_server`` (labgrid has no adb resource).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from harness.codec.strict_yaml import read_yaml
from harness.config.kinds import KINDS
from harness.config.profile import DeviceProfile, ProfileError
from harness.devices.bring_up import kind_module
from harness.devices.lab_place import LabResourceError, LabResources, SerialAddress, ServiceAddress
from harness.untrusted.reading import InputFileError, brief
from harness.untrusted.value_rules import (
    ValueRuleError,
    check_count,
    check_host,
    check_port,
    check_user,
    check_word,
)

_MAX_BAUDRATE = 20_000_000


def parse_env(text: str) -> tuple[str, LabResources]:
    """The place and its resources in ``labgrid-client env`` output; :class:`LabResourceError`."""
    source = "the acquired labgrid place (labgrid-client env)"
    try:
        data = read_yaml(text, source)
    except InputFileError as exc:
        raise LabResourceError(str(exc)) from None
    targets = data.get("targets") if isinstance(data, Mapping) else None
    if not isinstance(targets, Mapping) or len(targets) != 1:
        raise LabResourceError(f"{source}: not one place under 'targets'")
    ((place, target),) = targets.items()
    try:
        place = check_word(place, "the labgrid place's name")
    except ValueRuleError as exc:
        raise LabResourceError(f"{source}: targets: {exc}") from None
    source = f"labgrid place {place!r} (labgrid-client env)"
    listed = target.get("resources") if isinstance(target, Mapping) else None
    if not isinstance(listed, list):
        raise LabResourceError(f"{source}: no targets.{place}.resources list")
    by_class: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for index, entry in enumerate(listed):
        if not isinstance(entry, Mapping) or len(entry) != 1:
            raise LabResourceError(f"{source}: resources[{index}] is not one 'Class: {{...}}'")
        ((cls, fields),) = entry.items()
        if not isinstance(fields, Mapping):
            raise LabResourceError(f"{source}: resources[{index}].{brief(cls)}: not a mapping")
        by_class.setdefault(str(cls), []).append((f"resources[{index}].{cls}", fields))
    service = _one(by_class, "NetworkService", source, _service)
    serial = _one(by_class, "NetworkSerialPort", source, _serial)
    power = any(cls.endswith("PowerPort") for cls in by_class)
    return place, LabResources(service, serial, power)


def _one(
    by_class: Mapping[str, list[tuple[str, Mapping[str, Any]]]], cls: str, source: str, read: Any
) -> Any:
    found = by_class.get(cls, [])
    if len(found) > 1:
        raise LabResourceError(
            f"{source}: {len(found)} {cls} resources; the harness uses one per place (give the "
            "device's own place, or match only one of them with add-match)"
        )
    if not found:
        return None
    where, fields = found[0]
    try:
        return read(fields)
    except ValueRuleError as exc:
        raise LabResourceError(f"{source}: {where}.{exc.args[0]}") from None


def _field(fields: Mapping[str, Any], key: str, check: Any) -> Any:
    try:
        return check(fields.get(key))
    except ValueRuleError as exc:
        raise ValueRuleError(f"{key}: {exc}") from None


def _service(fields: Mapping[str, Any]) -> ServiceAddress:
    port = fields.get("port", 22)
    return ServiceAddress(
        _field(fields, "address", check_host),
        _field({"port": port}, "port", check_port),
        _field(fields, "username", check_user),
    )


def _serial(fields: Mapping[str, Any]) -> SerialAddress:
    if fields.get("port") is None:
        raise ValueRuleError(
            "port: none; the exporter has not started ser2net for it "
            "(is the serial device present on the exporter?)"
        )
    return SerialAddress(
        _field(fields, "host", check_host),
        _field(fields, "port", check_port),
        _field(
            {"speed": fields.get("speed", 115200)},
            "speed",
            lambda v: check_count(v, 1, _MAX_BAUDRATE),
        ),
    )


def check_lab_profile(profile: DeviceProfile) -> DeviceProfile:
    """A lab profile with stand-in values for the fields the lab fills, for the transport's
    own checks of the rest; :class:`ProfileError` if the profile sets one of them itself."""
    lab = KINDS[profile.transport].lab
    if lab is None:
        return profile  # the place is only held (a host-attached device): nothing to fill
    given = sorted(set(profile.settings) & set(lab.fields))
    if given:
        raise ProfileError(
            f"{profile.where('transport.' + given[0])}: comes from the acquired labgrid place "
            f"({', '.join(lab.fields)} are the lab's); remove it from the profile"
        )
    settings = {**profile.settings, **dict(lab.placeholder)}
    return dataclasses.replace(profile, settings=settings)


def with_lab_address(profile: DeviceProfile, resources: LabResources, place: str) -> DeviceProfile:
    """``profile`` (without its labgrid setting) with the acquired place's address filled in
    by its kind's ``lab_settings``; :class:`LabResourceError` names the place and the field."""
    if KINDS[profile.transport].lab is None:
        return profile
    filled = kind_module(profile).lab_settings(profile, resources, place)
    return dataclasses.replace(profile, settings={**profile.settings, **filled})
