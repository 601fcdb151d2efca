"""What an acquired labgrid place offers a device kind: its resources' addresses and its tags.

:mod:`harness.lab.resources` reads them from the lab (untrusted input) into a
:class:`LabResources`; a lab-capable kind's ``lab_settings(profile, resources, place)``
(``harness/devices/<kind>.py``, registered in :mod:`harness.profiles.kinds`) turns them
into its transport fields. Pure data, below the farm, so a kind's module can use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from harness.transport.base import DeviceUnavailable
from harness.untrusted.value_rules import ValueRuleError

T = TypeVar("T")


class LabResourceError(DeviceUnavailable):
    """The acquired place's resources are missing or malformed; the message names the field."""


@dataclass(frozen=True)
class ServiceAddress:
    """A ``NetworkService``: an SSH server on the place's device."""

    host: str
    port: int
    user: str


SERIAL_PROTOCOLS = ("rfc2217", "raw")  # labgrid's NetworkSerialPort.protocol


@dataclass(frozen=True)
class SerialAddress:
    """A ``NetworkSerialPort``: the device's UART behind a network serial server, RFC 2217
    (ser2net's, labgrid's default) or raw TCP (``protocol: raw``)."""

    host: str
    port: int
    speed: int
    protocol: str = "rfc2217"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "socket" if self.protocol == "raw" else "rfc2217"
        return f"{scheme}://{host}:{self.port}"


@dataclass(frozen=True)
class PowerPort:
    """A ``NetworkPowerPort``: a networked power switch, driven by labgrid's model module."""

    model: str
    host: str
    index: int


@dataclass(frozen=True)
class LabResources:
    """The resources of one acquired place that the harness uses, and the place's tags."""

    service: ServiceAddress | None = None
    serial: SerialAddress | None = None
    # The place's tags as its admin set them (labgrid-client set-tags), not yet checked:
    # e.g. adb_serial and adb_server of an Android phone, for which labgrid has no resource.
    tags: tuple[tuple[str, str], ...] = ()
    power_port: PowerPort | None = None  # a NetworkPowerPort, which the harness can cycle
    coordinator: str = "COORDINATOR"  # the lab's, for the hints

    def tag(self, place: str, key: str, rule: Callable[[object], T], example: str) -> T:
        """The place's tag ``key``, checked with ``rule`` (the profile's own rule for the
        field it fills); :class:`LabResourceError` names the place, the tag and the fix."""
        value = dict(self.tags).get(key)
        fix = f"'labgrid-client -x {self.coordinator} -p {place} set-tags {key}={example}'"
        if value is None:
            raise LabResourceError(f"labgrid place {place!r} has no tag {key}; set it: {fix}")
        try:
            return rule(value)
        except ValueRuleError as exc:
            raise LabResourceError(
                f"labgrid place {place!r}: tags.{key}: {exc}; correct it: {fix}"
            ) from None
