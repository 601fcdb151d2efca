"""Choosing how the agent runs: the profile's agent.deployment, or what the device says."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from harness.devices.base import DeviceSetupError
from harness.devices.deployment import Deployment, choose_deployment
from harness.devices.hosted import HostedDevice
from harness.profiles.device_profile import DeviceProfile, ProfileError, load_profile, parse_profile
from harness.transport.base import (
    ByteStream,
    CommandResult,
    DeviceFacts,
    Transport,
    TransportError,
)
from harness.transport.local import LocalTransport

PHONE = b"have /system/bin/linker64\nno /lib/ld-linux-aarch64.so.1\nsdk 34\n"


class AnsweringTransport(Transport):
    """A device that answers every command with one canned result, and counts them."""

    def __init__(self, os: str, stdout: bytes = b"", exit_code: int = 0) -> None:
        self._facts = DeviceFacts(abi="arm64-v8a", os=os, work_dir="/data/local/tmp/x")
        self._result = (exit_code, stdout)
        self.commands: list[tuple[str, ...]] = []

    def facts(self) -> DeviceFacts:
        return self._facts

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> CommandResult:
        self.commands.append(tuple(argv))
        code, out = self._result
        return CommandResult(tuple(argv), code, out, b"sh: broken\n" if code else b"")

    def push(self, local: Path, remote: str) -> None:
        raise AssertionError("choosing a mode pushes nothing")

    def pull(self, remote: str, local: Path) -> None:
        raise AssertionError("choosing a mode pulls nothing")

    def open_stream(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> ByteStream:
        raise AssertionError("choosing a mode starts nothing")

    def close(self) -> None:
        pass


def profile(agent: dict[str, object] | None = None) -> DeviceProfile:
    data = {"transport": {"kind": "adb"}, "work_dir": "/data/local/tmp/x", "agent": agent or {}}
    return parse_profile(data, Path("devices/phone.yaml"))


def test_an_android_device_without_the_glibc_loader_gets_the_bundle():
    transport = AnsweringTransport("android", PHONE)
    choice = choose_deployment(profile(), transport)
    assert choice.mode is Deployment.GLIBC_BUNDLE
    assert choice.reason == (
        "device: Android SDK 34, /system/bin/linker64, no /lib/ld-linux-aarch64.so.1"
    )
    (argv,) = transport.commands
    assert argv[:2] == ("sh", "-c")  # one fixed script, nothing from the profile in it


def test_an_android_device_with_a_glibc_loader_runs_the_agent_natively():
    answer = b"no /system/bin/linker64\nhave /lib/ld-linux-aarch64.so.1\nsdk 30\n"
    choice = choose_deployment(profile(), AnsweringTransport("android", answer))
    assert choice.mode is Deployment.NATIVE
    assert "no /system/bin/linker64, /lib/ld-linux-aarch64.so.1" in choice.reason


def test_a_linux_device_runs_natively_without_being_asked():
    transport = AnsweringTransport("linux")
    assert choose_deployment(profile(), transport).mode is Deployment.NATIVE
    assert transport.commands == []


@pytest.mark.parametrize("mode", ["native", "glibc-bundle"])
def test_the_profile_field_wins_over_the_device(mode):
    transport = AnsweringTransport("android", PHONE)
    choice = choose_deployment(profile({"deployment": mode}), transport)
    assert choice.mode is Deployment(mode)
    assert choice.reason == "agent.deployment in devices/phone.yaml"
    assert transport.commands == []


def test_a_prebuilt_agent_runs_as_it_was_built(tmp_path):
    chosen = choose_deployment(profile({"prebuilt": str(tmp_path)}), AnsweringTransport("android"))
    assert chosen.mode is Deployment.NATIVE


def test_a_device_that_cannot_be_asked_is_device_trouble():
    with pytest.raises(TransportError, match=r"exit 2\): sh: broken"):
        choose_deployment(profile(), AnsweringTransport("android", b"", exit_code=2))


def test_unknown_modes_and_a_bundled_prebuilt_are_one_line_profile_errors(tmp_path):
    with pytest.raises(
        ProfileError,
        match=r"agent.deployment: 'bionic' is not one of auto, "
        r"native, glibc-bundle",
    ):
        profile({"deployment": "bionic"})
    with pytest.raises(ProfileError, match=r"agent\.prebuilt is run as it was built"):
        profile({"deployment": "glibc-bundle", "prebuilt": str(tmp_path)})


def test_shipped_phone_profiles_use_the_bundle():
    assert load_profile("pixel8").agent.deployment == "glibc-bundle"
    assert load_profile("pixel8").agent.prebuilt is None
    emulated = load_profile("adb-emu")
    assert emulated.agent.deployment == "auto" and emulated.agent.wrapper == ("qemu-aarch64",)


def test_android_abi_runs_natively_only_as_an_ndk_build():
    device = HostedDevice(profile({"deployment": "native"}), AnsweringTransport("android", PHONE))
    with pytest.raises(DeviceSetupError, match=r"arm64-v8a with agent\.deployment: glibc-bundle"):
        device.agent_build()


def test_the_bundle_is_for_aarch64_agents_only(tmp_path):
    host = dataclasses.replace(
        load_profile("host"),
        work_dir=str(tmp_path),
        agent=dataclasses.replace(load_profile("host").agent, deployment="glibc-bundle"),
    )
    device = HostedDevice(host, LocalTransport(str(tmp_path)))
    with pytest.raises(
        DeviceSetupError,
        match=r"agent\.deployment: the glibc bundle carries "
        "aarch64 glibc; the x86_64 agent runs as it is",
    ):
        device.deploy_agent()
