"""Where a labgrid place's device is: its resources, read as untrusted input.

labgrid's client session (:mod:`harness.lab.client_session`) holds every resource the
exporters announce, e.g. for a place::

    NetworkService     {address: 127.0.0.2, port: 2222, username: etdevice}
    NetworkSerialPort  {host: 127.0.0.2, port: 41193, speed: 115200}
    NetworkPowerPort   {model: simplerest, host: "http://...", index: 0}

That data comes from the lab (exporters describe their own resources), so it is read
like a profile: every value the transport uses is checked with the profile's own rules
(:mod:`harness.untrusted.value_rules`), and a place whose resources fail them is not
chosen (:func:`read_resources` with ``acquired=False``, before reserving). The device
kind (its registry entry's ``lab``, :mod:`harness.profiles.kinds`) then fills the
transport fields a lab profile leaves out, through its module's ``lab_settings``:
``host``, ``port`` and ``user`` of an SSH device from its ``NetworkService``;
``url`` (and ``baudrate``) of a serial device from its ``NetworkSerialPort`` (the
ser2net RFC 2217 port the exporter opens at each acquisition, so no fixed URL could
be right; ``protocol: raw``, a plain TCP port, gives a ``socket://`` URL); ``serial``,
``server_host`` and ``server_port`` of an Android device from
the place's tags ``adb_serial`` and ``adb_server`` (labgrid has no adb resource).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from harness.devices.acquired_place import (
    SERIAL_PROTOCOLS,
    LabResourceError,
    LabResources,
    PowerPort,
    SerialAddress,
    ServiceAddress,
)
from harness.devices.bring_up import kind_module
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.kinds import device_kind
from harness.untrusted.reading import brief, printable
from harness.untrusted.value_rules import (
    ValueRuleError,
    check_count,
    check_host,
    check_port,
    check_user,
)

if TYPE_CHECKING:
    from harness.lab.client_session import RawPlace, Resource

_MAX_BAUDRATE = 20_000_000
_MAX_RESOURCES = 64  # of one place


def read_resources(place: str, resources: Iterable[Resource], acquired: bool) -> LabResources:
    """The device's addresses in a place's ``resources``; :class:`LabResourceError`
    names place, resource and field. Before acquisition (``acquired`` False) a serial
    port has no network port yet, which is not an error."""
    source = f"labgrid place {place!r}"
    by_class: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for index, resource in enumerate(resources):
        if index >= _MAX_RESOURCES:
            raise LabResourceError(f"{source}: more than {_MAX_RESOURCES} resources match it")
        path = "/".join(
            printable(p)[:100] for p in (resource.exporter, resource.group, resource.cls)
        )
        where = f"resources.{path}"
        by_class.setdefault(resource.cls, []).append((where, dict(resource.args)))
    service = _one(by_class, "NetworkService", source, _service)
    serial = _one(by_class, "NetworkSerialPort", source, lambda f: _serial(f, acquired))
    power = _one(by_class, "NetworkPowerPort", source, _power)
    return LabResources(service, serial, power_port=power)


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


def _serial(fields: Mapping[str, Any], acquired: bool) -> SerialAddress | None:
    if fields.get("port") is None and not acquired:
        _field(fields, "host", check_host)
        return None  # the exporter opens its network port at each acquisition
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
        _field({"protocol": fields.get("protocol", "rfc2217")}, "protocol", _protocol),
    )


def _protocol(value: object) -> str:
    if value not in SERIAL_PROTOCOLS:
        raise ValueRuleError(
            f"{brief(value)} is not one of {', '.join(SERIAL_PROTOCOLS)} (labgrid's "
            "NetworkSerialPort protocols)"
        )
    return str(value)


_POWER_MODEL = re.compile(r"[a-z][a-z0-9_]{0,40}")  # a module of labgrid.driver.power


def _power(fields: Mapping[str, Any]) -> PowerPort:
    model = fields.get("model")
    if not isinstance(model, str) or not _POWER_MODEL.fullmatch(model):
        raise ValueRuleError(
            f"model: {brief(model)} is not a labgrid power model name ([a-z][a-z0-9_]*)"
        )
    host = fields.get("host")
    if not isinstance(host, str) or not host.isprintable() or not 0 < len(host) <= 1000:
        raise ValueRuleError(f"host: {brief(host)} is not a printable URL of at most 1000 chars")
    index = fields.get("index", 0)
    if isinstance(index, str) and index.isdecimal() and len(index) < 5:
        index = int(index)  # labgrid keeps a power port's index as text
    index = _field({"index": index}, "index", lambda v: check_count(v, 0, 1023))
    return PowerPort(model, host, index)


def with_lab_address(profile: DeviceProfile, resources: LabResources, place: str) -> DeviceProfile:
    """``profile`` (without its labgrid setting) with the acquired place's address filled in
    by its kind's ``lab_settings``; :class:`LabResourceError` names the place and the field."""
    if device_kind(profile.kind).lab is None:
        return profile
    filled = kind_module(profile).lab_settings(profile, resources, place)
    return dataclasses.replace(profile, settings={**profile.settings, **filled})


def matched_resources(raw: RawPlace, resources: Iterable[Resource]) -> list[Resource]:
    """The exported resources a place's matches take (labgrid's own fnmatch rule)."""
    found = []
    for resource in resources:
        for exporter, group, cls, name in raw.matches:
            if (
                fnmatchcase(resource.exporter, exporter)
                and fnmatchcase(resource.group, group)
                and fnmatchcase(resource.cls, cls)
                and (not name or fnmatchcase(resource.name, name))
            ):
                found.append(resource)
                break
    return found
