"""The glibc bundle: built from the agent's DT_NEEDED closure, self-contained on a phone.

The adb-emu tests run on the emulated phone, whose processes see no aarch64 sysroot,
with the real adb client and the real arm64 runtime under qemu-user (without -L).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prerequisites import require

from harness.channel.stream_channel import AgentDidNotStart, StreamChannel
from harness.data.options import OptionsMap
from harness.devices.base import DeviceSetupError
from harness.devices.bring_up import open_device
from harness.devices.deployment import Deployment
from harness.devices.hosted import HostedDevice
from harness.emulators.adb.device_root import HIDDEN_HOST_DIRS
from harness.profiles.device_profile import load_profile
from harness.programs.probe_program import probe_program
from harness.runner import CaseRunner
from harness.runtime.agent_build import AgentBuild, ensure_agent
from harness.runtime.glibc_bundle import (
    GLIBC_SYSROOT,
    LOADER_NAME,
    GlibcBundleError,
    ensure_glibc_bundle,
    library_closure,
    start_argv,
)
from harness.runtime.wheel_sdk import SdkPaths
from harness.session.agent_session import AgentSession
from harness.transport.local import LocalTransport

MAP = OptionsMap.from_dict({"ProbeA": {"threads": 4, "fast": True}, "ProbeB": {"mode": "x"}})
GLIBC = {LOADER_NAME, "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0",
         "libgcc_s.so.1", "libstdc++.so.6"}  # fmt: skip


def test_the_bundle_is_the_agent_its_executorch_libraries_and_glibc_stripped():
    build = ensure_agent("aarch64")
    bundle = ensure_glibc_bundle(build)
    names = {f.name for f in bundle.files}
    assert bundle.agent.name == "et-agent"
    assert names == {"et-agent", *(lib.name for lib in build.libraries), *GLIBC}
    assert all(f.parent == bundle.directory for f in bundle.files)
    assert bundle.size_bytes < bundle.unstripped_bytes
    for file in bundle.files:
        sections = subprocess.run(
            ["aarch64-linux-gnu-readelf", "-S", "-W", str(file)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert ".symtab" not in sections and ".debug_info" not in sections, file.name
    assert bundle.load_alignment >= 16 * 1024  # runs on 4 KiB and 16 KiB page kernels
    assert (bundle.directory / LOADER_NAME).stat().st_mode & 0o111
    assert ensure_glibc_bundle(build) == bundle  # cached by content


@pytest.fixture
def extra_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentBuild:
    """An aarch64 'agent' linking a library no list in the harness names, shipped beside a
    plugin it does not link (as a backend's dlopen'ed plugin would be), which needs libm."""
    require("aarch64-linux-gnu-gcc")
    monkeypatch.setenv("ET_HARNESS_CACHE", str(tmp_path / "cache"))
    dist = tmp_path / "dist"
    dist.mkdir()
    (tmp_path / "extra.c").write_text("int extra_answer(void) { return 42; }\n")
    (tmp_path / "main.c").write_text(
        "#include <stdio.h>\nint extra_answer(void);\n"
        'int main(void) { printf("answer %d\\n", extra_answer()); return 0; }\n'
    )
    (tmp_path / "plugin.c").write_text(
        "#include <math.h>\ndouble plugin_cos(double x) { return cos(x); }\n"
    )
    gcc = "aarch64-linux-gnu-gcc"
    subprocess.run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-o",
            str(dist / "libplugin.so"),
            str(tmp_path / "plugin.c"),
            "-Wl,--no-as-needed",
            "-lm",
        ],
        check=True,
    )
    subprocess.run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-Wl,-soname,libextra.so.1",
            "-o",
            str(dist / "libextra.so.1"),
            str(tmp_path / "extra.c"),
        ],
        check=True,
    )
    subprocess.run(
        [gcc, "-o", str(dist / "et-agent"), str(tmp_path / "main.c"), str(dist / "libextra.so.1")],
        check=True,
    )
    sdk = SdkPaths(root=tmp_path / "no-sdk", abi="aarch64", version="0")
    libraries = (dist / "libextra.so.1", dist / "libplugin.so")
    return AgentBuild("aarch64", dist, dist / "et-agent", libraries, sdk)


def test_linked_and_shipped_libraries_are_bundled_and_the_bundle_runs_with_the_sysroot_hidden(
    extra_build,
):
    require("qemu-aarch64", "unshare", root=True)
    bundle = ensure_glibc_bundle(extra_build)
    assert {f.name for f in bundle.files} == {
        "et-agent",
        "libextra.so.1",
        "libplugin.so",
        "libm.so.6",
        "libc.so.6",
        LOADER_NAME,
    }
    hidden = f'mount -t tmpfs -o ro none {GLIBC_SYSROOT} && exec "$@"'
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", hidden, "sh",
            "qemu-aarch64", *start_argv(str(bundle.agent))]  # fmt: skip
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert (ran.returncode, ran.stdout) == (0, "answer 42\n"), ran.stderr
    plain = subprocess.run([*argv[:-4], str(bundle.agent)], capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    assert plain.returncode != 0 and LOADER_NAME in plain.stderr  # no glibc but the bundle's


def test_a_needed_library_found_nowhere_is_named(extra_build):
    (extra_build.dist_dir / "libextra.so.1").unlink()
    with pytest.raises(
        GlibcBundleError,
        match=r"et-agent needs libextra.so.1, which is in none "
        r"of: .*/dist, /usr/aarch64-linux-gnu/lib",
    ):
        library_closure(extra_build.binary, (extra_build.dist_dir, GLIBC_SYSROOT / "lib"))


def _host_program_with_libraries(program: str) -> list[Path]:
    """``program`` and the x86_64 files its loader maps (Debian has no static qemu-aarch64)."""
    listing = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    return [Path(program), *(Path(p) for p in re.findall(r"(/\S+) \(0x", listing))]


def test_the_bundle_serves_cases_in_a_chroot_holding_only_qemu_and_the_bundle(tmp_path):
    """Nothing aarch64 exists but the bundle: no sysroot to hide, no shell, no /usr."""
    require("qemu-aarch64", "unshare", "chroot", "ldd", root=True)
    bundle = ensure_glibc_bundle(ensure_agent("aarch64"))
    root = tmp_path / "root"
    qemu = shutil.which("qemu-aarch64")
    assert qemu is not None
    for path in _host_program_with_libraries(qemu):
        inside = root / path.relative_to("/")
        inside.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path.resolve(), inside)
    for file in bundle.files:
        (root / "phone").mkdir(exist_ok=True)
        shutil.copy2(file, root / "phone" / file.name)
    (root / "proc").mkdir()
    (root / "sys").mkdir()  # XNNPACK reads the CPU topology there
    (root / "programs").mkdir()

    def program_for(delegates: tuple[str, ...]) -> str:
        local = probe_program(delegates)
        shutil.copy2(local, root / "programs" / local.name)
        return f"/programs/{local.name}"

    enter = ('mount -t proc proc "$1/proc" && mount --rbind /sys "$1/sys" && '
             'exec chroot "$1" "$2" /phone/ld-linux-aarch64.so.1 --library-path /phone '
             "/phone/et-agent")  # fmt: skip
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        enter,
        "sh",
        str(root),
        qemu,
    ]  # qemu-aarch64 at the same path inside the chroot
    transport = LocalTransport(str(tmp_path))
    runner = CaseRunner(
        lambda: AgentSession(StreamChannel(transport.open_stream(argv), timeout=60)), program_for
    )
    try:
        assert "XnnpackBackend" in runner.registered
        runner.load(MAP).raise_for_differences()
        runner.set(MAP).raise_for_differences()
        runner.get(MAP, MAP).raise_for_differences()
    finally:
        runner.close()
    assert sorted(p.name for p in root.iterdir()) == ["lib", "lib64", "phone", "proc",
                                                      "programs", "sys", "usr"]  # fmt: skip


# ---- on the emulated phone -------------------------------------------------------------


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").splitlines()


def test_on_adb_emu_the_agent_loads_nothing_but_the_bundle():
    require("adb", "qemu-aarch64", root=True)
    device = open_device(load_profile("adb-emu"))
    try:
        assert isinstance(device, HostedDevice)
        choice = device.deployment()
        assert choice.mode is Deployment.GLIBC_BUNDLE
        assert choice.reason.endswith("/system/bin/linker64, no /lib/ld-linux-aarch64.so.1")
        transport = device.transport
        assert transport is not None
        hidden = transport.run(
            ["sh", "-c", 'for d in "$@"; do ls -A "/$d" | wc -l; done; test -e "$0"; echo $?',
             "/lib/ld-linux-aarch64.so.1", *HIDDEN_HOST_DIRS],
            timeout=30,
        )  # fmt: skip
        assert _lines(hidden.stdout) == ["0"] * len(HIDDEN_HOST_DIRS) + ["1"]

        agent = device.deploy_agent()
        directory = posixpath.dirname(agent)
        # -E: LD_DEBUG for the arm64 loader only, not for qemu's own (x86_64) one
        ran = transport.run(["qemu-aarch64", "-E", "LD_DEBUG=libs", *start_argv(agent),
                             "--version"], timeout=60)  # fmt: skip
        assert ran.exit_code == 0, ran.stderr
        assert _lines(ran.stdout) == ["et-agent 0.1.0 (executorch 1.5.1, aarch64, wire format v2)"]
        opened = re.findall(r"(?:trying file|calling init: )=?\s*(\S+)", ran.stderr.decode())
        assert opened and all(p.startswith(directory + "/") for p in opened), opened
        initialised = set(re.findall(r"calling init: \S+/(\S+)", ran.stderr.decode()))
        needed = library_closure(
            device.agent_build().binary, (device.agent_build().dist_dir, GLIBC_SYSROOT / "lib")
        )
        assert initialised == set(needed)  # the whole DT_NEEDED closure, all from the bundle
    finally:
        device.close()


@pytest.mark.parametrize(
    "wrapper", [("qemu-aarch64",), ("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")]
)
def test_on_adb_emu_the_agent_without_the_bundle_fails_saying_what_to_do(wrapper):
    require("adb", "qemu-aarch64", root=True)
    stock = load_profile("adb-emu")
    native = dataclasses.replace(
        stock,
        abi="aarch64",  # push the plain aarch64 glibc build, as a Linux board gets it
        agent=dataclasses.replace(stock.agent, deployment="native", wrapper=wrapper),
    )
    device = open_device(native)
    runner = CaseRunner(device.start_session, device.program_for)
    try:
        with pytest.raises(AgentDidNotStart) as raised:
            _ = runner.hello
    finally:
        runner.close()
        device.close()
    message = str(raised.value)
    assert "Could not open '/lib/ld-linux-aarch64.so.1'" in message  # qemu, on the device
    assert (
        "adb-emu.yaml: agent.deployment: the agent is a glibc program and this Android "
        "device has no glibc loader" in message
    )
    assert "use agent.deployment: glibc-bundle (or auto)" in message


def test_on_adb_emu_the_glibc_build_is_refused_before_pushing_without_the_bundle():
    require("adb", root=True)
    stock = load_profile("adb-emu")
    native = dataclasses.replace(stock, agent=dataclasses.replace(stock.agent, deployment="native"))
    device = open_device(native)
    try:
        assert isinstance(device, HostedDevice)
        with pytest.raises(
            DeviceSetupError, match="no agent build runs natively on ABI 'arm64-v8a'"
        ):
            device.deploy_agent()
    finally:
        device.close()


def test_bundle_deployment_is_content_hashed_and_repairs_only_what_differs(tmp_path, monkeypatch):
    require("adb", "qemu-aarch64", root=True)
    device = open_device(load_profile("adb-emu"))
    try:
        assert isinstance(device, HostedDevice)
        agent = device.deploy_agent()
        assert re.fullmatch(r"/data/local/tmp/et-harness/agent/[0-9a-f]{16}/et-agent", agent)
        bundle = ensure_glibc_bundle(device.agent_build())
        transport = device.transport
        assert transport is not None
        remotes = [posixpath.join(posixpath.dirname(agent), f.name) for f in bundle.files]
        for file, remote in zip(bundle.files, remotes, strict=True):
            transport.pull(remote, tmp_path / file.name)
            assert (tmp_path / file.name).read_bytes() == file.read_bytes(), file.name
        odd = "/data/local/tmp/odd name; $(x)"
        transport.run(["sh", "-c", 'printf x > "$1"', "sh", odd], timeout=30)
        assert transport.sha256_each([remotes[0], "/data/local/tmp/none", odd]) == (
            transport.sha256(remotes[0]),
            None,
            transport.sha256(odd),
        )

        libm = next(r for r in remotes if r.endswith("/libm.so.6"))
        transport.run(["sh", "-c", 'printf broken > "$1"', "sh", libm], timeout=30)
        pushed: list[str] = []
        push = transport.push

        def counted_push(local: Path, remote: str) -> None:
            pushed.append(posixpath.basename(remote))
            push(local, remote)

        monkeypatch.setattr(transport, "push", counted_push)
        assert HostedDevice(device.profile, transport).deploy_agent() == agent
        assert pushed == ["libm.so.6"]
    finally:
        device.close()
