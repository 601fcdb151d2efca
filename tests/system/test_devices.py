"""Devices brought up from profiles: deployment by content hash, and device loss.

These use the real emulated devices (OpenSSH in a namespace, adb-emu with the real
adb client) and the real arm64 runtime under qemu-user.
"""

from __future__ import annotations

import dataclasses
import posixpath
import shutil
import time
from pathlib import Path

import pytest

from harness.data.options import OptionsMap
from harness.devices.base import DeviceSetupError
from harness.devices.bring_up import open_device
from harness.devices.hosted import HostedDevice
from harness.profiles.device_profile import DeviceProfile, load_profile, parse_profile
from harness.runner import CaseRunner
from harness.runtime.agent_build import ensure_agent
from harness.transport.base import TransportError
from harness.transport.local import LocalTransport
from harness.untrusted.trust import TRUSTED_PROFILES_ENV

MAP = OptionsMap.from_dict({"ProbeA": {"threads": 4, "fast": True}, "ProbeB": {"mode": "x"}})


class CountingTransport(LocalTransport):
    """The host transport, counting pushes."""

    def __init__(self, work_dir: str) -> None:
        super().__init__(work_dir)
        self.pushed: list[str] = []

    def push(self, local: Path, remote: str) -> None:
        self.pushed.append(posixpath.basename(remote))
        super().push(local, remote)


def host_profile(work_dir: Path) -> DeviceProfile:
    return dataclasses.replace(load_profile("host"), work_dir=str(work_dir))


def test_deploy_skips_files_the_device_already_has(tmp_path):
    profile = host_profile(tmp_path)
    first = CountingTransport(str(tmp_path))
    agent = HostedDevice(profile, first).deploy_agent()
    assert first.pushed[0] == "et-agent"
    assert any(n.startswith("libexecutorch") for n in first.pushed)

    again = CountingTransport(str(tmp_path))
    assert HostedDevice(profile, again).deploy_agent() == agent
    assert again.pushed == []

    library = next(p for p in Path(agent).parent.iterdir() if p.name.startswith("libexecutorch"))
    library.write_bytes(b"corrupted")
    repaired = CountingTransport(str(tmp_path))
    HostedDevice(profile, repaired).deploy_agent()
    assert repaired.pushed == [library.name]


def test_program_is_pushed_once_per_delegate_set(tmp_path):
    transport = CountingTransport(str(tmp_path))
    device = HostedDevice(host_profile(tmp_path), transport)
    first = device.program_for(("ProbeA", "ProbeB"))
    assert device.program_for(("ProbeA", "ProbeB")) == first
    assert device.program_for(("ProbeB", "ProbeA")) != first
    assert [n for n in transport.pushed if n.endswith(".pte")] == [
        posixpath.basename(first),
        posixpath.basename(device.program_for(("ProbeB", "ProbeA"))),
    ]


def test_prebuilt_agent_directory_is_deployed_and_run(tmp_path, monkeypatch):
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(tmp_path))  # its agent fields run here
    prebuilt = tmp_path / "agent-dist"
    shutil.copytree(ensure_agent("x86_64").dist_dir, prebuilt)
    profile = parse_profile(
        {
            "transport": {"kind": "local"},
            "work_dir": str(tmp_path / "dev"),
            "abi": "arm64-v8a",
            "agent": {"prebuilt": "agent-dist"},
        },
        tmp_path / "profile.yaml",
    )
    assert profile.agent.prebuilt == prebuilt
    device = open_device(profile)
    runner = CaseRunner(device.start_session, device.program_for)
    try:
        runner.load(MAP).raise_for_differences()
        assert isinstance(device, HostedDevice)
        assert device.deploy_agent().startswith(str(tmp_path / "dev" / "agent"))
    finally:
        runner.close()
        device.close()


def test_prebuilt_directory_without_an_agent_is_a_clear_setup_error(tmp_path, monkeypatch):
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(tmp_path))  # its agent fields run here
    profile = parse_profile(
        {"transport": {"kind": "local"}, "work_dir": str(tmp_path), "agent": {"prebuilt": "nope"}},
        tmp_path / "profile.yaml",
    )
    with pytest.raises(DeviceSetupError, match=r"agent\.prebuilt: no et-agent"):
        device = open_device(profile)
        assert isinstance(device, HostedDevice)
        device.deploy_agent()


@pytest.mark.parametrize("link", ["et-agent", "libleak.so"])
def test_prebuilt_files_that_link_outside_the_directory_are_not_pushed(tmp_path, link, monkeypatch):
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(tmp_path))  # its agent fields run here
    prebuilt = tmp_path / "agent-dist"
    shutil.copytree(ensure_agent("x86_64").dist_dir, prebuilt)
    secret = tmp_path / "secret"
    secret.write_text("a host file the profile's author wants")
    (prebuilt / link).unlink(missing_ok=True)
    (prebuilt / link).symlink_to(secret)
    transport = CountingTransport(str(tmp_path / "dev"))
    profile = parse_profile(
        {
            "transport": {"kind": "local"},
            "work_dir": str(tmp_path / "dev"),
            "agent": {"prebuilt": "agent-dist"},
        },
        tmp_path / "profile.yaml",
    )
    with pytest.raises(DeviceSetupError, match=rf"agent.prebuilt: {link} links to .*secret"):
        HostedDevice(profile, transport).deploy_agent()
    assert transport.pushed == []


def test_android_abi_without_an_ndk_build_is_a_clear_setup_error(tmp_path):
    profile = dataclasses.replace(host_profile(tmp_path), abi="arm64-v8a")
    with pytest.raises(DeviceSetupError, match=r"android-arm64\.md"):
        HostedDevice(profile, LocalTransport(str(tmp_path))).deploy_agent()


def test_profile_wrapper_and_env_reach_the_agent_process(tmp_path, monkeypatch):
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(tmp_path))  # its agent fields run here
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text('#!/bin/sh\necho "$ET_MARK" > "$0.ran"\nexec "$@"\n')
    wrapper.chmod(0o755)
    profile = parse_profile(
        {
            "transport": {"kind": "local"},
            "work_dir": str(tmp_path / "dev"),
            "agent": {"wrapper": [str(wrapper)], "env": {"ET_MARK": "hello from the profile"}},
        },
        tmp_path / "wrapped.yaml",
    )
    device = open_device(profile)
    runner = CaseRunner(device.start_session, device.program_for)
    try:
        runner.load(MAP).raise_for_differences()
    finally:
        runner.close()
        device.close()
    assert Path(f"{wrapper}.ran").read_text() == "hello from the profile\n"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ssh-emu", "adb-emu", "mcu-emu", "mcu-m55-emu"])
def test_killing_the_device_daemon_mid_run_is_a_transport_error(name):
    device = open_device(load_profile(name))
    runner = CaseRunner(device.start_session, device.program_for)
    try:
        runner.load(MAP).raise_for_differences()
        assert device.emulator is not None
        device.emulator.kill()
        started = time.monotonic()
        with pytest.raises(TransportError):
            runner.load(MAP)
        assert time.monotonic() - started < device.profile.timeouts.case
    finally:
        runner.close()
        device.close()


@pytest.mark.parametrize("name", ["ssh-emu", "adb-emu"])
def test_emulated_device_reports_the_real_arm64_runtime(name):
    device = open_device(load_profile(name))
    runner = CaseRunner(device.start_session, device.program_for)
    try:
        facts = {f.key: f.value for f in runner.hello.facts}
        assert facts["abi"] == "aarch64"
        assert facts["runtime"] == "executorch 1.5.1"
        assert "XnnpackBackend" in runner.registered
        runner.load(MAP).raise_for_differences()
    finally:
        runner.close()
        device.close()
