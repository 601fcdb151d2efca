"""A firmware device: a board whose firmware is the agent, on a serial port.

There is nothing to deploy and no file system: firmware built with ExecuTorch's
runtime receives the program a LOAD runs as an upload just before it; the stand-in
takes the LOAD request's delegate list as the program (the path is empty either way).
A crash leaves no files to collect.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.channel.serial.arq import SerialLink
from harness.channel.serial.connect import connect as connect_serial
from harness.channel.serial.link_config import LinkConfig
from harness.data.messages import Action, Outcome, Request
from harness.devices.base import Device
from harness.devices.deployment import Deployment, DeploymentChoice
from harness.profiles.device_profile import DeviceProfile
from harness.session.agent_session import AgentSession, Session, TimeLimit
from harness.session.program_upload import ProgramUploadingSession
from harness.transport.base import DeviceUnavailable
from harness.transport.serial import ResetLine, SerialSettings

if TYPE_CHECKING:  # started only for an emulated board (harness.devices.serial)
    from harness.emulators.mcu import McuEmulator


class FirmwareDevice(Device):
    """A board reached over its serial link, emulated (``qemu``) or real (``port``).

    A fresh agent means a fresh registry, so every session after the first resets the
    board: an emulated board is restarted; a real one is reset through DTR or RTS
    when its profile wires one (``transport.reset``). A board in a lab place with a
    power port is reset through the lab (``reset``) before every session, the first
    included, so a pool board starts with a fresh registry. A board with neither is
    asked to reset itself (REBOOT, docs/serial-protocol.md) at every session whose boot
    HELLO was not seen, if its firmware serves it; else it keeps its state.
    """

    def __init__(
        self,
        profile: DeviceProfile,
        *,
        qemu: McuEmulator | None = None,
        port: SerialSettings | None = None,
        reset: Callable[[], None] | None = None,
        resources: contextlib.ExitStack | None = None,
    ) -> None:
        super().__init__(profile, resources, qemu)
        if (qemu is None) == (port is None):
            raise ValueError("a firmware device is either emulated (qemu) or on a port")
        self._qemu = qemu
        self._port = port
        self._reset = reset
        self._sessions = 0

    def deployment(self) -> DeploymentChoice:
        return DeploymentChoice(Deployment.NATIVE, "the firmware is the agent")

    def start_session(self, time_limit: TimeLimit | None = None) -> Session:
        """A session to a freshly reset board (the board keeps its own timing)."""
        timeout = self.profile.timeouts.connect
        if self._qemu is not None:
            if self._sessions:
                self._qemu.stop()
                self._qemu.start()
            self._sessions += 1
            link_config = LinkConfig(hello_timeout=timeout, boot_timeout=timeout)
            return firmware_session(self._qemu.connect(link_config), self.name)
        config = self._port
        assert config is not None  # one of the two, checked in __init__
        if self._reset is not None:  # through its lab place, before every session
            self._reset()
            config = dataclasses.replace(config, wait_boot=False)  # the boot HELLO may be gone
        elif self._sessions and config.reset is ResetLine.NONE:
            config = dataclasses.replace(config, wait_boot=False)
        self._sessions += 1
        port_link = connect_serial(config, name=self.name)
        session = firmware_session(port_link, self.name)
        if self._reset is None and config.reset is ResetLine.NONE and not port_link.boot_hello:
            try:
                _soft_reset(session, port_link, self.name)
            except BaseException:
                session.close()
                raise
        return session

    def program_for(self, delegates: tuple[str, ...]) -> str:
        """Empty: the board holds no files. Firmware built with ExecuTorch's runtime gets
        the program uploaded before each LOAD (:mod:`harness.session.program_upload`); the
        stand-in takes the request's delegate list as the program."""
        return ""


def _soft_reset(session: AgentSession, link: SerialLink, name: str) -> None:
    """REBOOT the board, if its firmware serves it (HELLO ``capabilities``), and wait for
    its boot HELLO: the fresh registry of a board nothing else can reset."""
    served = str(session.request(Request(Action.HELLO)).fact("capabilities") or "")
    if "reboot" not in served.split(","):
        return  # the runner names what to set if the kept registry is in the way
    report = session.request(Request(Action.REBOOT))
    if report.outcome is not Outcome.OK:
        raise DeviceUnavailable(f"{name}: the firmware refused REBOOT: {report.message}")
    link.await_reboot()


def firmware_session(link: SerialLink, name: str = "mcu") -> AgentSession:
    """The board's agent session; one that uploads programs if the firmware serves uploads."""
    if link.hello.serves(Action.PROGRAM_DATA) and link.hello.serves(Action.PROGRAM_END):
        return ProgramUploadingSession(link, link.hello.max_message, name=name)
    return AgentSession(link, name=name)
