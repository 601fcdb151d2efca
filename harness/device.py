"""A device brought up from its profile: emulator (if any), transport, deployed agent.

:class:`Device` is the one place that knows how profile fields become a
transport, where the agent and probe programs go on the device, and how the agent
is started. Everything above it talks to :class:`harness.agent.session.AgentLink`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import posixpath
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from harness.agent.build import AGENT_BINARY_NAME, AgentBuild, ensure_agent
from harness.agent.glibc_bundle import GlibcBundleError, ensure_glibc_bundle, start_argv
from harness.agent.session import AgentLink, AgentSession, TimeLimit
from harness.cache import cache_root
from harness.deployment import Deployment, DeploymentChoice, choose_deployment, no_glibc_hint
from harness.emulators.adb_emulator import AdbEmulator
from harness.emulators.adb_server import PrivateAdbServer
from harness.emulators.mcu_boards import DEFAULT_MACHINE
from harness.emulators.qemu_mcu import QemuMcu, build_firmware
from harness.emulators.sshd import SshdEmulator
from harness.farm.labgrid import for_transport_checks
from harness.lifecycle.owner import owned_directory
from harness.probe_program import probe_program
from harness.profile import DeviceProfile, ProfileError
from harness.sdk_prefix import sdk_from_prefix
from harness.serial_link import LinkConfig, SerialLink
from harness.transport.adb import AdbTarget, AdbTransport
from harness.transport.base import Transport, TransportError
from harness.transport.local import LocalTransport
from harness.transport.serial import ResetLine, SerialConfigError, SerialPortConfig
from harness.transport.serial import connect as connect_serial
from harness.transport.ssh import SshProfile, SshTransport
from harness.xnnpack_program import XNNPACK_BACKEND, xnnpack_program

# Device ABI (as the device reports it) -> the agent build that runs there. Android's
# arm64-v8a runs the aarch64 glibc build only as a glibc bundle (harness/deployment.py).
_AGENT_BUILD_FOR_ABI = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64-v8a": "aarch64"}
_GLIBC_ONLY_IN_BUNDLE = ("arm64-v8a",)


class Emulator(Protocol):
    """An emulated device the harness started."""

    def kill(self) -> None:
        """End it abruptly, as a crash or a pulled cable would."""


class DeviceSetupError(TransportError):
    """The device could not be prepared (agent not deployable, emulator not starting)."""


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class Device:
    """One device: its profile, its transport and the files the harness put there."""

    def __init__(self, profile: DeviceProfile, transport: Transport | None,
                 resources: contextlib.ExitStack | None = None,
                 emulator: Emulator | None = None,
                 board: SerialBoard | None = None) -> None:
        self.profile = profile
        self.transport = transport  # None for a board reached only through its serial agent
        self.emulator = emulator  # the emulated device the harness started, if any
        self._board = board
        self._resources = resources
        self._pushed: dict[str, str] = {}  # remote path -> sha256 known to be there
        self._agent_path: str | None = None
        self._deployment: DeploymentChoice | None = None
        self._programs: dict[tuple[str, ...], str] = {}  # delegates -> device path

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def work_dir(self) -> str:
        return self._files().facts().work_dir

    def _files(self) -> Transport:
        if self.transport is None:
            raise DeviceSetupError(
                f"{self.name}: a serial board has no file system or processes for the harness "
                "to use; its firmware is the agent"
            )
        return self.transport

    # ---- files ---------------------------------------------------------------------

    def push_once(self, local: Path, remote: str) -> None:
        """Push ``local`` unless the device already has identical content there."""
        self.push_each_once([(local, remote)])

    def push_each_once(self, files: Sequence[tuple[Path, str]]) -> None:
        """Push each ``(local, remote)`` whose content the device lacks (one check for all)."""
        wanted = [(local, remote, _sha256(local)) for local, remote in files]
        unknown = [entry for entry in wanted if self._pushed.get(entry[1]) != entry[2]]
        if not unknown:
            return
        there = self._files().sha256_each([remote for _, remote, _ in unknown])
        for (local, remote, digest), have in zip(unknown, there, strict=True):
            if have != digest:
                self._files().push(local, remote)
            self._pushed[remote] = digest

    # ---- the agent -----------------------------------------------------------------

    def deployment(self) -> DeploymentChoice:
        """How the agent runs here: the profile's ``agent.deployment``, or asked of the device."""
        if self._deployment is None:
            if self._board is not None:
                self._deployment = DeploymentChoice(Deployment.NATIVE, "the firmware is the agent")
            else:
                self._deployment = choose_deployment(self.profile, self._files())
        return self._deployment

    def agent_build(self) -> AgentBuild:
        """The agent build this device runs (profile ``abi`` or the device's own).

        It is built against the profile's ``agent.sdk`` prefix if set, else as
        :func:`~harness.agent.build.ensure_agent` chooses (``$ET_HARNESS_SDK`` or the
        pinned wheel).
        """
        abi = self.profile.abi or self._files().facts().abi
        build = _AGENT_BUILD_FOR_ABI.get(abi)
        bundled = self.deployment().mode is Deployment.GLIBC_BUNDLE
        if build is None or (abi in _GLIBC_ONLY_IN_BUNDLE and not bundled):
            where = self.profile.where("abi")
            raise DeviceSetupError(
                f"{where}: no agent build runs natively on ABI {abi!r} here; known: "
                f"x86_64, aarch64, and arm64-v8a with agent.deployment: glibc-bundle (an "
                "NDK build goes in agent.prebuilt: see agent/cmake/android-arm64.md)"
            )
        own = self.profile.agent.sdk
        sdk = sdk_from_prefix(own, self.profile.where("agent.sdk")) if own is not None else None
        return ensure_agent(build, sdk)

    def deploy_agent(self) -> str:
        """Put the agent and its libraries on the device; return the agent's path there.

        The directory is named after the files' content hash, so devices keep one copy
        per build and a run never overwrites files another run is using.
        """
        if self._agent_path is None:
            files = self._agent_files()
            digest = hashlib.sha256(b"".join(_sha256(f).encode() for f in files)).hexdigest()
            remote_dir = posixpath.join(self.work_dir, "agent", digest[:16])
            self.push_each_once([(f, posixpath.join(remote_dir, f.name)) for f in files])
            self._agent_path = posixpath.join(remote_dir, files[0].name)
        return self._agent_path

    def _agent_files(self) -> tuple[Path, ...]:
        """The agent binary first, then the libraries it loads from its own directory."""
        prebuilt = self.profile.agent.prebuilt
        if prebuilt is None and self.deployment().mode is Deployment.GLIBC_BUNDLE:
            try:
                return ensure_glibc_bundle(self.agent_build()).files
            except GlibcBundleError as exc:
                raise DeviceSetupError(f"{self.profile.where('agent.deployment')}: {exc}") from None
        if prebuilt is None:
            return self.agent_build().deploy_files()
        binary = prebuilt / AGENT_BINARY_NAME
        if not binary.is_file():
            raise DeviceSetupError(
                f"{self.profile.where('agent.prebuilt')}: no {AGENT_BINARY_NAME} in {prebuilt}; "
                "build it as agent/cmake/android-arm64.md says and point here at the install dir"
            )
        libraries = sorted(
            p for p in prebuilt.iterdir()
            if (p.suffix == ".so" or ".so." in p.name) and p.is_file()
        )
        for file in (binary, *libraries):
            # A profile is untrusted: a link to ~/.ssh/id_ed25519 named libx.so would
            # copy that file to a device the profile's author may own.
            if not file.resolve().is_relative_to(prebuilt.resolve()):
                raise DeviceSetupError(
                    f"{self.profile.where('agent.prebuilt')}: {file.name} links to "
                    f"{file.resolve()}, outside {prebuilt}; only files inside the directory "
                    "are pushed: copy it in"
                )
        return (binary, *libraries)

    def start_link(self, time_limit: TimeLimit | None = None) -> AgentLink:
        """Start a fresh agent (a new process, or a reset board) and return its link.

        Each report is awaited for the profile's case timeout at most, and never
        beyond ``time_limit`` (agent processes; a serial board keeps its own timing).
        """
        if self._board is not None:
            return self._board.fresh_link()
        agent = self.deploy_agent()
        mode = self.deployment().mode
        started = start_argv(agent) if mode is Deployment.GLIBC_BUNDLE else [agent]
        argv = [*self.profile.agent.wrapper, *started]
        stream = self._files().open_stream(argv, env=dict(self.profile.agent.env) or None)
        android_glibc = (
            mode is Deployment.NATIVE and self.profile.agent.prebuilt is None
            and self._files().facts().os == "android"
        )  # fmt: skip
        hint = no_glibc_hint(self.profile) if android_glibc else ""
        return AgentSession(stream, timeout=self.profile.timeouts.case, name=self.name,
                            time_limit=time_limit, start_hint=hint)

    def program_for(self, delegates: tuple[str, ...]) -> str:
        """Device path of a program calling ``delegates``, pushed if needed.

        Delegates ending in one ``XnnpackBackend`` get the XNNPACK program (a real
        XNNPACK graph, the other delegates as probes before it); any other tuple a
        probe program. A serial board has no file system: its LOAD takes the
        request's delegate list as the program, so the path is empty.
        """
        if self._board is not None:
            return ""
        remote = self._programs.get(delegates)
        if remote is None:
            *probes, last = delegates or ("",)
            if last == XNNPACK_BACKEND and XNNPACK_BACKEND not in probes:
                local = xnnpack_program(tuple(probes))
            else:
                local = probe_program(delegates)
            remote = posixpath.join(self.work_dir, "programs", local.name)
            self.push_once(local, remote)
            self._programs[delegates] = remote
        return remote

    def close(self) -> None:
        """Release the transport and stop the emulator, if the harness started one."""
        try:
            if self.transport is not None:
                self.transport.close()
        finally:
            if self._resources is not None:
                resources, self._resources = self._resources, None
                resources.close()


class SerialBoard:
    """A board whose firmware is the agent, on a serial port.

    A fresh agent means a fresh registry, so every link after the first resets the
    board: an emulated board is restarted; a real one is reset through DTR or RTS
    when its profile wires one (``transport.reset``), else it keeps its state. A board
    in a lab place with a power port is reset through the lab (``reset``) before
    every link, the first included, so a pool board starts with a fresh registry.
    """

    def __init__(self, profile: DeviceProfile, qemu: QemuMcu | None = None,
                 reset: Callable[[], None] | None = None) -> None:
        self._profile = profile
        self._qemu = qemu
        self._reset = reset
        self._links = 0
        self._config: SerialPortConfig | None = None
        if qemu is None:
            try:
                self._config = SerialPortConfig.from_settings(
                    profile.settings, profile.where("transport")
                )
            except SerialConfigError as exc:
                raise ProfileError(str(exc)) from None

    def fresh_link(self) -> SerialLink:
        timeout = self._profile.timeouts.connect
        if self._qemu is not None:
            if self._links:
                self._qemu.stop()
                self._qemu.start()
            self._links += 1
            return self._qemu.connect(LinkConfig(hello_timeout=timeout, boot_timeout=timeout))
        config = self._config
        assert config is not None  # a real board always has its port settings
        if self._reset is not None:  # through its lab place, before every session
            self._reset()
            config = dataclasses.replace(config, wait_boot=False)  # the boot HELLO may be gone
        elif self._links and config.reset is ResetLine.NONE:
            config = dataclasses.replace(config, wait_boot=False)
        self._links += 1
        return connect_serial(config, name=self._profile.name)


def open_device(profile: DeviceProfile, *,
                board_reset: Callable[[], None] | None = None) -> Device:
    """Bring up the device ``profile`` describes (starting its emulator, if any).

    ``board_reset`` resets a serial board from outside (its lab place's power port).
    """
    with contextlib.ExitStack() as stack:
        if profile.transport == "serial":
            qemu = None
            if profile.emulator == "qemu-mcu":
                if profile.settings:
                    raise ProfileError(
                        f"{profile.where('transport.' + sorted(profile.settings)[0])}: the "
                        "qemu-mcu emulator sets the port itself; an emulated board takes no "
                        "transport fields"
                    )
                machine = profile.machine or DEFAULT_MACHINE
                qemu = stack.enter_context(
                    QemuMcu(build_firmware(machine), machine=machine)
                )
            elif profile.emulator is not None:
                raise ProfileError(f"{profile.where('emulator')}: a serial device's emulator "
                                   f"is qemu-mcu; got {profile.emulator!r}")
            check_transport_settings(profile)
            board = SerialBoard(profile, qemu, board_reset)
            return Device(profile, None, stack.pop_all(), qemu, board)
        emulator = None
        if profile.emulator is not None:
            profile, emulator = _start_emulator(profile, stack)
        return Device(profile, _transport(profile), stack.pop_all(), emulator)


def check_transport_settings(profile: DeviceProfile) -> None:
    """Validate the profile's transport fields without reaching the device.

    :class:`ProfileError` names the file and the field; devices are opened later,
    so this lets a listing or a run refuse a broken profile before anything starts.
    A lab profile is checked without its labgrid setting, with stand-ins for the
    address its place will give (:func:`harness.farm.labgrid.for_transport_checks`).
    """
    profile = for_transport_checks(profile)
    if profile.emulator is not None:
        return  # the emulator supplies them; open_device refuses fields it would set
    if profile.transport == "local" and profile.settings:
        raise ProfileError(f"{profile.where('transport.' + sorted(profile.settings)[0])}: "
                           "unknown field; the local transport takes none")
    if profile.transport == "ssh":
        SshProfile.from_device(profile)
    elif profile.transport == "adb":
        AdbTarget.from_profile(profile)
    elif profile.transport == "serial":
        try:
            SerialPortConfig.from_settings(profile.settings, profile.where("transport"))
        except SerialConfigError as exc:
            raise ProfileError(str(exc)) from None


def _transport(profile: DeviceProfile) -> Transport:
    check_transport_settings(profile)
    if profile.transport == "local":
        return LocalTransport(profile.work_dir, profile.where("work_dir"))
    if profile.transport == "adb":
        return AdbTransport.from_profile(profile)
    if profile.transport == "ssh":
        return SshTransport(SshProfile.from_device(profile))
    raise ProfileError(
        f"{profile.where('transport.kind')}: transport {profile.transport!r} is not wired up yet"
    )


def _emulator_dir(profile: DeviceProfile, stack: contextlib.ExitStack) -> Path:
    """A private directory for one emulated device, removed when the device closes."""
    return stack.enter_context(owned_directory(f"{profile.name}-", cache_root() / "emulators"))


# Transport fields each emulator fills in itself.
_EMULATOR_SETTINGS = {"adbd": ("connect", "server_port"), "sshd": ("host", "ssh_config")}


def _start_emulator(
    profile: DeviceProfile, stack: contextlib.ExitStack
) -> tuple[DeviceProfile, Emulator]:
    """Start the emulated device; return the profile with the transport fields it needs."""
    owned = _EMULATOR_SETTINGS.get(profile.emulator, ())
    clash = sorted(set(profile.settings) & set(owned))
    if clash:
        raise ProfileError(
            f"{profile.where('transport.' + clash[0])}: set by the {profile.emulator} emulator "
            f"the harness starts ({', '.join(owned)}); remove it from the profile"
        )
    home = _emulator_dir(profile, stack)
    if profile.emulator == "adbd":
        server = stack.enter_context(PrivateAdbServer(home / "adb-server"))
        phone = AdbEmulator(home / "device-root")
        endpoint = stack.enter_context(phone)
        settings = {**profile.settings, "connect": endpoint.serial, "server_port": server.port}
        return dataclasses.replace(profile, settings=settings), phone
    if profile.emulator == "sshd":
        board = stack.enter_context(SshdEmulator(home / "sshd"))
        settings = {**profile.settings, "host": board.alias, "ssh_config": str(board.ssh_config)}
        return dataclasses.replace(profile, settings=settings), board
    raise ProfileError(f"{profile.where('emulator')}: {profile.emulator!r} is not wired up yet")
