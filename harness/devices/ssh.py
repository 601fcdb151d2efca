"""Device kind ``ssh``: a Linux board over OpenSSH; emulator ``sshd`` (ssh-emu)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from harness.devices.hosted import HostedDevice, emulator_home, with_settings
from harness.profile import DeviceProfile
from harness.transport.ssh import SshProfile, SshTransport


def check_settings(profile: DeviceProfile) -> None:
    SshProfile.from_device(profile)


def open_device(profile: DeviceProfile, resources: contextlib.ExitStack,
                board_reset: Callable[[], None] | None) -> HostedDevice:
    emulator = None
    if profile.emulator is not None:
        from harness.emulators.sshd import SshdEmulator

        emulator = resources.enter_context(SshdEmulator(emulator_home(profile, resources) / "sshd"))
        profile = with_settings(profile, host=emulator.alias, ssh_config=str(emulator.ssh_config))
    transport = SshTransport(SshProfile.from_device(profile))
    return HostedDevice(profile, transport, resources, emulator)
