"""Device kind ``serial``: an MCU whose firmware is the agent; emulator ``mcu-emu``."""

from __future__ import annotations

from harness.devices.acquired_place import LabResourceError, LabResources
from harness.devices.base import OpenContext
from harness.devices.firmware import FirmwareDevice
from harness.devices.host_tools import HostTool
from harness.profiles.device_profile import DeviceProfile, ProfileError
from harness.profiles.kinds import DeviceKind, LabAddress, Settings
from harness.profiles.mcu_boards import DEFAULT_MACHINE
from harness.profiles.validator import check_known, parse_settings, refuse
from harness.transport.serial import SerialSettings
from harness.untrusted.reading import brief
from harness.untrusted.value_rules import (
    ValueRuleError,
    check_absolute_path,
    check_count,
    check_seconds,
    split_host_port,
)

_URL_SCHEMES = ("socket", "rfc2217")
_MAX_BAUDRATE = 20_000_000

# The transport fields of a serial profile (besides ``port`` or ``url``) and their rules.
FIELDS = {
    "baudrate": lambda v: check_count(v, 1, _MAX_BAUDRATE),
    "rtscts": None,
    "xonxoff": None,
    "reset": None,
    "reset_pulse": check_seconds,
    "wait_boot": None,
    "boot_timeout": check_seconds,
    "hello_timeout": check_seconds,
}
_WHERE_THE_PORT_IS = ("port", "url")


# What mcu-emu runs on this machine: QEMU's Arm system emulator and the firmware's compiler.
_MCU_EMU = (
    HostTool("qemu-system-arm", "qemu-system-arm", "emulates the Cortex-M board"),
    HostTool("arm-none-eabi-gcc", "gcc-arm-none-eabi", "builds the MCU firmware"),
    HostTool("arm-none-eabi-g++", "gcc-arm-none-eabi", "builds the MCU firmware"),
)


def host_tools(profile: DeviceProfile) -> tuple[HostTool, ...]:
    """A board's firmware is its agent: only the emulated board needs anything here."""
    return _MCU_EMU if profile.emulator is not None else ()


def check_device_path(value: object) -> str:
    """A serial device such as /dev/ttyACM0: a plain path, never a pyserial URL
    (``spy://`` would write a log file, ``loop://`` fake a board)."""
    return check_absolute_path(value, "the serial device, e.g. /dev/ttyACM0")


def check_port_url(value: object) -> str:
    """``socket://HOST:PORT`` or ``rfc2217://HOST:PORT``, nothing after the port."""
    scheme, separator, address = value.partition("://") if isinstance(value, str) else ("", "", "")
    if not separator or scheme not in _URL_SCHEMES:
        raise ValueRuleError(
            f"{brief(value)} is not socket://HOST:PORT or rfc2217://HOST:PORT; for a local "
            "device give port: /dev/..."
        )
    split_host_port(address)
    return str(value)


def port_settings(profile: DeviceProfile) -> SerialSettings:
    """The profile's transport fields, checked: where the port is and how to use it."""
    where, settings = profile.where("transport"), profile.settings
    check_known(settings, (*FIELDS, *_WHERE_THE_PORT_IS), where)
    if ("port" in settings) == ("url" in settings):
        raise ProfileError(
            f"{where}: give exactly one of 'port' (a device path such as /dev/ttyACM0) "
            "or 'url' (socket://HOST:PORT, rfc2217://HOST:PORT)"
        )
    field = "port" if "port" in settings else "url"
    try:
        url = (check_device_path if field == "port" else check_port_url)(settings[field])
    except ValueRuleError as exc:
        raise refuse(where, field, str(exc)) from None
    rest = {key: value for key, value in settings.items() if key not in _WHERE_THE_PORT_IS}
    return parse_settings(
        SerialSettings, rest, where, fields=FIELDS, also_allowed=_WHERE_THE_PORT_IS, url=url
    )


def check_settings(profile: DeviceProfile) -> None:
    port_settings(profile)


def lab_settings(profile: DeviceProfile, resources: LabResources, place: str) -> dict[str, object]:
    """The place's ``NetworkSerialPort`` (ser2net's RFC 2217 port, new at each acquisition);
    its speed unless the profile sets ``baudrate``."""
    serial = resources.serial
    if serial is None:
        raise LabResourceError(
            f"labgrid place {place!r} has no NetworkSerialPort for {profile.name}'s serial "
            "transport"
        )
    return {"url": serial.url, "baudrate": profile.settings.get("baudrate", serial.speed)}


def open_device(profile: DeviceProfile, context: OpenContext) -> FirmwareDevice:
    resources, board_reset = context.resources, context.board_reset
    if profile.emulator is None:
        return FirmwareDevice(
            profile, port=port_settings(profile), reset=board_reset, resources=resources
        )
    if profile.settings:
        raise ProfileError(
            f"{profile.where('transport.' + sorted(profile.settings)[0])}: the mcu-emu "
            "emulator sets the port itself; an emulated board takes no transport fields"
        )
    from harness.emulators.mcu import McuEmulator, build_firmware
    from harness.runtime.firmware_tree import runtime_source

    machine = profile.machine or DEFAULT_MACHINE
    source = profile.agent.source
    tree = runtime_source(source, profile.where("agent.source")) if source else None
    qemu = resources.enter_context(
        McuEmulator(build_firmware(machine, source=tree), machine=machine)
    )
    return FirmwareDevice(profile, qemu=qemu, reset=board_reset, resources=resources)


def lock_key(settings: Settings) -> str:
    """One board, whichever profile names it: its serial port."""
    return f"serial:{settings.get('port') or settings.get('url')}"


KIND = DeviceKind(
    name="serial",
    settings=SerialSettings,
    emulator="mcu-emu",
    lock_key=lock_key,
    lab=LabAddress(fields=("url", "port"), placeholder=(("url", "rfc2217://127.0.0.1:1"),)),
    takes_outside_reset=True,
    builds_agent=False,
)
