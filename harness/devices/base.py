"""What every device offers the harness, whatever its kind.

A device is brought up from its profile by its kind (:mod:`harness.profiles.kinds`,
:mod:`harness.devices.bring_up`).
Two classes implement this interface: :class:`~harness.devices.hosted.HostedDevice`
(an operating system the harness reaches through a transport: files, processes, an
agent it deploys) and :class:`~harness.devices.firmware.FirmwareDevice` (a board whose
firmware is the agent, reached over a serial link). Callers above this layer use only
what is declared here.
"""

from __future__ import annotations

import abc
import contextlib
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.devices.deployment import DeploymentChoice
from harness.errors import UsageError
from harness.profiles.device_profile import DeviceProfile
from harness.session.agent_session import Session, TimeLimit
from harness.transport.base import TransportError

if TYPE_CHECKING:
    from harness.runtime.race_detector import RaceLog


class Emulator(Protocol):
    """An emulated device the harness starts: a real daemon or machine on this host.

    An emulator may also offer ``reset()`` where its device has a reset to emulate,
    ``run()`` where it holds its CPU until the harness's own serial link is ready (mcu-emu): a
    client that is not the harness's (``et-harness emu``) calls it first, and
    ``console_log`` (a path) where it keeps what its console printed (linux-emu).
    """

    def start(self) -> Mapping[str, object]:
        """Bring it up; the transport settings it provides (as :attr:`settings`)."""

    @property
    def settings(self) -> Mapping[str, object]:
        """The transport settings it provides while running (a profile's field names)."""

    def stop(self) -> object:
        """Bring it down and remove what it added; safe to call twice (any result is unused)."""

    def kill(self) -> None:
        """End it abruptly, as a crash or a pulled cable would."""


@dataclass(frozen=True)
class OpenContext:
    """What a kind's ``open_device(profile, context)`` is given besides the profile."""

    # Whatever the kind starts (its emulator, a private server) goes here; the device
    # closes it, and so does bring-up if opening fails.
    resources: contextlib.ExitStack
    # A reset from outside (a lab place's power port, before each agent session); only
    # for kinds whose KIND says takes_outside_reset.
    board_reset: Callable[[], None] | None = None


class DeviceSetupError(TransportError):
    """The device could not be prepared (agent not deployable, emulator not starting)."""


class NoProgramFiles(UsageError):
    """The device cannot load a program file of the user's (no file system): a property
    of the device, not device trouble, so a test asking for it fails rather than being
    retried as an infrastructure error."""


class Device(abc.ABC):
    """One device brought up for a run: start agents on it, find its programs, close it."""

    def __init__(
        self,
        profile: DeviceProfile,
        resources: contextlib.ExitStack | None = None,
        emulator: Emulator | None = None,
    ) -> None:
        self.profile = profile
        self.emulator = emulator  # the emulated device the harness started, if any
        self._resources = resources
        # The race detector's reports, when the profile runs the agent under one (host only).
        self.race_log: RaceLog | None = None

    @property
    def name(self) -> str:
        return self.profile.name

    @abc.abstractmethod
    def deployment(self) -> DeploymentChoice:
        """How the agent runs on this device."""

    @abc.abstractmethod
    def start_session(self, time_limit: TimeLimit | None = None) -> Session:
        """Start a fresh agent and return the session to it."""

    @abc.abstractmethod
    def program_for(self, delegates: tuple[str, ...]) -> str:
        """The device path of a program whose delegates are ``delegates``."""

    def push_program(self, local: Path, inputs: Path | None = None) -> str:
        """The device path of the program file ``local`` (a user's own), pushed if the
        device lacks its content, with the ``inputs`` file the agent reads beside it if
        given; a device without a file system has none."""
        raise NoProgramFiles(
            f"{self.name}: the device has no file system to load a program file from "
            "(its firmware loads the programs it was built with); use a Linux or "
            "Android device"
        )

    def forget_program(self, remote: str) -> None:
        """Remove the program file at ``remote`` from the device (a load said it is
        damaged); a device without a file system has none."""
        return None

    has_files = False  # whether the device has a file system (file_exists, remove_file)

    def file_exists(self, remote: str) -> bool:
        """Whether a file is at ``remote`` on the device (an option's declared effect)."""
        raise NoProgramFiles(f"{self.name}: the device has no file system to look in")

    def remove_file(self, remote: str) -> None:
        """Remove the file at ``remote`` from the device, if there is one."""
        raise NoProgramFiles(f"{self.name}: the device has no file system")

    def collect_artifacts(self, dest: Path) -> list[Path]:
        """Files a crashed agent left on the device, pulled into ``dest``; none by default."""
        return []

    def copy_console_log(self, dest: Path) -> list[Path]:
        """The console log of the emulator the harness started (its ``console_log``), if it
        keeps one, copied into ``dest``: it goes with the emulator's directory as the
        device closes."""
        console = getattr(self.emulator, "console_log", None)
        if not isinstance(console, Path) or not console.is_file():
            return []
        dest.mkdir(parents=True, exist_ok=True)
        return [Path(shutil.copyfile(console, dest / console.name))]

    def restart_emulator(self) -> None:
        """Stop the emulator the harness started and start it again (its daemon or process
        died); :class:`DeviceSetupError` if it does not come up. Start a new agent after."""
        if self.emulator is None:
            raise DeviceSetupError(f"{self.name} is no emulated device: nothing to restart")
        try:
            self.emulator.stop()
            self.emulator.start()
        except (OSError, RuntimeError) as exc:  # the emulators' own errors
            raise DeviceSetupError(f"{self.name}: its emulator did not start again: {exc}") from exc

    def power_cycled(self) -> None:
        """Its board was power-cycled from outside: wait until it answers again (kinds
        whose KIND says awaits_boot); :class:`DeviceSetupError` if it does not."""
        raise DeviceSetupError(f"{self.name}: the harness cannot wait for this device to boot")

    def close(self) -> None:
        """Release what the device holds and stop its emulator, if the harness started one."""
        if self._resources is not None:
            resources, self._resources = self._resources, None
            resources.close()
