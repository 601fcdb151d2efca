"""Bring your own ExecuTorch: the agent built against an install prefix.

The prefix is laid out from the pinned wheel's files as ``cmake --install`` lays out
an ExecuTorch build: ``include/``, ``lib/`` with the shared libraries and the CMake
package in ``lib/cmake/ExecuTorch`` (with the relocatable config's root marker,
``share/cmake``). Its version file is rewritten to 1.5.0 (whose runtime libraries
are the 1.5.1 ones), so the agent's HELLO shows which package it was built against.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.codec import wire
from harness.data.messages import Action, Outcome, Report, Request
from harness.data.options import OptionsMap
from harness.profiles.device_profile import ProfileError, load_profile
from harness.programs.xnnpack import XNNPACK_BACKEND, expected_output, xnnpack_program
from harness.runtime.agent_build import AgentBuildError, ensure_agent
from harness.runtime.install_prefix import SDK_ENV, TRUSTED_ENV, SdkPrefixError, sdk_from_prefix
from harness.runtime.wheel_sdk import SdkTooOld, check_sdk_version, ensure_sdk


def lay_out_prefix(prefix: Path, version: str = "1.5.0") -> Path:
    """An install prefix made of the pinned x86_64 wheel's files."""
    wheel = ensure_sdk("x86_64")
    shutil.copytree(wheel.include, prefix / "include")
    (prefix / "lib").mkdir(parents=True)
    for library in wheel.lib.glob("*.so"):
        shutil.copy2(library, prefix / "lib" / library.name)
    for config_dir in ("lib/cmake/ExecuTorch", "share/cmake"):
        shutil.copytree(wheel.cmake_dir, prefix / config_dir)
        version_file = prefix / config_dir / "executorch-config-version.cmake"
        text = version_file.read_text().replace(
            'PACKAGE_VERSION "1.5.1"', f'PACKAGE_VERSION "{version}"'
        )
        version_file.write_text(text)
    return prefix


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def request(binary: Path, *requests: Request) -> list[Report]:
    data = b"".join(wire.encode_request(r) for r in requests)
    out = subprocess.run([str(binary)], input=data, capture_output=True, timeout=60, check=True)
    reports, rest = [], out.stdout
    while rest:
        length = wire.peek_header(rest[:16]).length
        reports.append(wire.decode_report(rest[:length]))
        rest = rest[length:]
    return reports


@pytest.mark.slow
def test_agent_builds_against_an_install_prefix_and_runs(tmp_path, monkeypatch) -> None:
    program = xnnpack_program()  # programs always come from the pinned wheel's schema
    prefix = lay_out_prefix(tmp_path / "prefix")
    monkeypatch.setenv(SDK_ENV, str(prefix))
    monkeypatch.setenv("ET_HARNESS_CACHE", str(tmp_path / "cache"))  # a build of its own
    build = ensure_agent("x86_64")
    assert build.sdk.root == prefix.resolve() and build.sdk.own_build
    assert build.sdk.cmake_dir == prefix.resolve() / "lib/cmake/ExecuTorch"
    shipped = {p.name: sha256(p) for p in build.libraries}
    assert shipped["libexecutorch.so"] == sha256(prefix / "lib" / "libexecutorch.so")
    hello, load = request(
        build.binary,
        Request(Action.HELLO),
        Request.load(str(program), (XNNPACK_BACKEND,), OptionsMap()),
    )
    assert hello.fact("runtime") == "executorch 1.5.0"  # the prefix's package, not the wheel
    assert [e.name for e in hello.entries] == ["QnnBackend", "OpenvinoBackend", XNNPACK_BACKEND]
    assert load.outcome is Outcome.OK, load.message
    assert load.fact("outputs") == expected_output()


def test_prefix_below_1_5_0_is_refused_clearly(tmp_path) -> None:
    prefix = lay_out_prefix(tmp_path / "old", version="1.4.1")
    with pytest.raises(
        SdkTooOld,
        match=r"executorch 1\.4\.1 has no C\+\+ SDK; the agent needs "
        r"1\.5\.0 or later",
    ):
        sdk_from_prefix(prefix)


@pytest.mark.parametrize("version", ["1.4.1", "1.2.0", "0.7.0"])
def test_pinned_versions_below_1_5_0_are_refused(version) -> None:
    with pytest.raises(SdkTooOld, match=r"agent/executorch-sdk\.lock: executorch"):
        check_sdk_version(version, "agent/executorch-sdk.lock")
    check_sdk_version("1.5.0", "agent/executorch-sdk.lock")


def test_prefix_problems_name_the_setting_and_the_fix(tmp_path) -> None:
    with pytest.raises(SdkPrefixError, match=f"{SDK_ENV}: .* is not a directory"):
        sdk_from_prefix(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SdkPrefixError, match=r"has no lib/libexecutorch\.so"):
        sdk_from_prefix(tmp_path / "empty")


def test_a_prefix_of_another_abi_is_refused(tmp_path, monkeypatch) -> None:
    prefix = lay_out_prefix(tmp_path / "prefix")
    with pytest.raises(AgentBuildError, match="is for x86_64, but an agent for aarch64"):
        ensure_agent("aarch64", sdk_from_prefix(prefix))


def test_profile_field_agent_sdk_names_a_prefix_the_user_trusts(tmp_path, monkeypatch) -> None:
    profile = tmp_path / "board.yaml"
    mine = (tmp_path.parent / "my-et").resolve()
    profile.write_text("transport: {kind: local}\nagent: {sdk: ../my-et}\n")
    monkeypatch.delenv(SDK_ENV, raising=False)
    monkeypatch.delenv(TRUSTED_ENV, raising=False)
    # Untrusted input may not make this machine run a package's CMake code.
    with pytest.raises(
        ProfileError,
        match=f"agent.sdk: {mine} is not a trusted ExecuTorch prefix: .* add it to {TRUSTED_ENV}",
    ):
        load_profile(str(profile))
    monkeypatch.setenv(TRUSTED_ENV, f"/elsewhere:{mine}")
    assert load_profile(str(profile)).agent.sdk == mine
    monkeypatch.delenv(TRUSTED_ENV)
    monkeypatch.setenv(SDK_ENV, str(mine))
    assert load_profile(str(profile)).agent.sdk == mine
    profile.write_text("transport: {kind: local}\nagent: {sdk: ../a, prebuilt: ../b}\n")
    with pytest.raises(ProfileError, match=r"agent\.sdk: .* not both"):
        load_profile(str(profile))
