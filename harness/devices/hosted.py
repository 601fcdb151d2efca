"""A hosted device: an operating system reached through a transport, the agent deployed there.

:class:`HostedDevice` is the one place that knows where the agent and probe
programs go on such a device and how the agent is started. The device kinds that
reach one (local, ssh, adb) differ only in the transport they open
(:mod:`harness.profiles.kinds`, :mod:`harness.devices.bring_up`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import posixpath
import time
from collections.abc import Sequence
from pathlib import Path

from harness.channel.stream_channel import StreamChannel
from harness.devices.base import Device, DeviceSetupError, Emulator
from harness.devices.core_files import collect_core_files
from harness.devices.deployment import (
    Deployment,
    DeploymentChoice,
    choose_deployment,
    no_glibc_hint,
)
from harness.devices.device_files import (
    AGENT_BUILDS_KEPT,
    INPUTS_SUFFIX,
    USER_PROGRAM_PREFIX,
    USER_PROGRAMS_BOUND,
    keep_bounded,
    keep_latest,
)
from harness.lifecycle.cache import cache_root
from harness.lifecycle.owner import owned_directory
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.kinds import device_kind
from harness.programs.probe_program import probe_program
from harness.programs.xnnpack import XNNPACK_BACKEND, xnnpack_program
from harness.runtime.agent_build import AGENT_BINARY_NAME, AgentBuild, ensure_agent
from harness.runtime.choice import sdk_for
from harness.runtime.glibc_bundle import GlibcBundleError, ensure_glibc_bundle, start_argv
from harness.runtime.install_prefix import sdk_from_prefix
from harness.runtime.race_detector import RaceLog
from harness.session.agent_session import AgentSession, Session, TimeLimit
from harness.transport.base import Transport, TransportError

# Device ABI (as the device reports it) -> the agent build that runs there. Android's
# arm64-v8a runs the aarch64 glibc build only as a glibc bundle (harness/devices/deployment.py).
_AGENT_BUILD_FOR_ABI = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64-v8a": "aarch64"}
_GLIBC_ONLY_IN_BUNDLE = ("arm64-v8a",)


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class HostedDevice(Device):
    """One hosted device: its profile, its transport and the files the harness put there."""

    def __init__(
        self,
        profile: DeviceProfile,
        transport: Transport,
        resources: contextlib.ExitStack | None = None,
        emulator: Emulator | None = None,
    ) -> None:
        super().__init__(profile, resources, emulator)
        self.transport = transport
        self._pushed: dict[str, str] = {}  # remote path -> sha256 known to be there
        self._agent_path: str | None = None
        self._deployment: DeploymentChoice | None = None
        self._programs: dict[tuple[str, ...], str] = {}  # delegates -> device path
        self._power_lost = False  # since the last push: pushes cut short may have left files

    def restart_emulator(self) -> None:
        """The emulator started again where the transport reaches it (its settings are
        checked to be the same); the transport's connections are made anew."""
        before = dict(self.emulator.settings) if self.emulator is not None else None
        super().restart_emulator()  # refuses a device without an emulator
        self._forget_files()  # after: the transport reads where the new one listens
        after = dict(self.emulator.settings) if self.emulator is not None else None
        if after != before:
            raise DeviceSetupError(
                f"{self.name}: its emulator came back with other transport settings "
                f"({after} instead of {before}); the transport cannot follow it"
            )

    def power_cycled(self) -> None:
        """Its board was power-cycled from outside (a lab place's power port): forget what
        it held and wait while it boots, until the transport answers, at most the
        profile's ``timeouts.connect``; :class:`DeviceSetupError` if it does not."""
        self._forget_files()
        bound = self.profile.timeouts.connect
        deadline = time.monotonic() + bound
        while True:
            try:
                self.transport.run(["true"], timeout=self.profile.timeouts.command)
                return
            except TransportError as exc:
                self.transport.close()
                if time.monotonic() >= deadline:
                    raise DeviceSetupError(
                        f"{self.name}: did not answer within {bound:g} s of its power cycle "
                        f"(timeouts.connect): {exc}"
                    ) from exc
            time.sleep(0.5)  # polling a board that boots: nothing tells when it is up

    def _forget_files(self) -> None:
        """A board that restarted or lost power: its connections are made anew, and what
        it held may be gone or half-written (a board keeps only what reached its flash):
        every file is checked again by its digest, and the first push removes what pushes
        cut short left."""
        self.transport.close()
        self._pushed.clear()
        self._programs.clear()
        self._agent_path = None
        self._power_lost = True

    @property
    def work_dir(self) -> str:
        return self.transport.facts().work_dir

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
        if self._power_lost:  # the first push since: no push of ours is under way there
            self.transport.remove_unfinished_pushes(self.work_dir, self.profile.timeouts.command)
            self._power_lost = False
        there = self.transport.sha256_each([remote for _, remote, _ in unknown])
        pushed = []
        for (local, remote, digest), have in zip(unknown, there, strict=True):
            if have != digest:
                self.transport.push(local, remote)
                pushed.append(remote)
        if pushed and not device_kind(self.profile.kind).on_this_machine:  # its power is ours
            self._write_through(pushed)
        self._pushed.update((remote, digest) for _, remote, digest in unknown)

    def _write_through(self, remotes: list[str]) -> None:
        """What was just pushed written through to the device's storage, before it counts
        as there: its data and its name (``sync FILE... FOLDER...``, coreutils' and
        busybox's; a plain ``sync`` where that is refused). A board that loses power later
        keeps it whole, never a name over data still in its page cache."""
        folders = sorted({posixpath.dirname(remote) for remote in remotes})
        timeout = self.profile.timeouts.command
        if self.transport.run(["sync", "--", *remotes, *folders], timeout=timeout).exit_code:
            self.transport.run(["sync"], timeout=timeout)

    # ---- the agent -----------------------------------------------------------------

    def deployment(self) -> DeploymentChoice:
        """How the agent runs here: the profile's ``agent.deployment``, or asked of the device."""
        if self._deployment is None:
            self._deployment = choose_deployment(self.profile, self.transport)
        return self._deployment

    def agent_build(self) -> AgentBuild:
        """The agent build this device runs (profile ``abi`` or the device's own).

        It is built against the run's runtime (``--runtime``, :mod:`harness.runtime.choice`)
        if one is chosen, else the profile's ``agent.sdk`` prefix if set, else as
        :func:`~harness.runtime.agent_build.ensure_agent` chooses (``$ET_HARNESS_SDK`` or the
        pinned wheel).
        """
        abi = self.profile.abi or self.transport.facts().abi
        build = _AGENT_BUILD_FOR_ABI.get(abi)
        bundled = self.deployment().mode is Deployment.GLIBC_BUNDLE
        if build is None or (abi in _GLIBC_ONLY_IN_BUNDLE and not bundled):
            where = self.profile.where("abi")
            raise DeviceSetupError(
                f"{where}: no agent build runs natively on ABI {abi!r} here; known: "
                f"x86_64, aarch64, and arm64-v8a with agent.deployment: glibc-bundle (an "
                "NDK build goes in agent.prebuilt: see agent/cmake/android-arm64.md)"
            )
        own, runtime = self.profile.agent.sdk, self.profile.agent.runtime
        if runtime is not None:  # the run's --runtime, over the profile's agent.sdk
            sdk = sdk_for(runtime, build)
        elif own is not None:
            sdk = sdk_from_prefix(own, self.profile.where("agent.sdk"))
        else:
            sdk = None
        detector = self.profile.agent.race_detector
        return ensure_agent(build, sdk, detector.sanitizer if detector else None)

    def deploy_agent(self) -> str:
        """Put the agent and its libraries on the device; return the agent's path there.

        The directory is named after the files' content hash, so devices keep one copy
        per build and a run never overwrites files another run is using; the
        :data:`AGENT_BUILDS_KEPT` most recently used builds are kept.
        """
        if self._agent_path is None:
            files = self._agent_files()
            digest = hashlib.sha256(b"".join(_sha256(f).encode() for f in files)).hexdigest()
            remote_dir = posixpath.join(self.work_dir, "agent", digest[:16])
            self.push_each_once([(f, posixpath.join(remote_dir, f.name)) for f in files])
            keep_latest(
                self.transport, remote_dir, AGENT_BUILDS_KEPT, self.profile.timeouts.command
            )
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
            p for p in prebuilt.iterdir() if (p.suffix == ".so" or ".so." in p.name) and p.is_file()
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

    def agent_command(self, *arguments: str) -> tuple[list[str], dict[str, str] | None]:
        """The argv and environment that start the agent here with ``arguments`` (say
        ``--no-records`` for a session; ``--oneshot IN OUT`` for a one-shot run), the
        agent deployed first.

        The one way an agent is started, for sessions and one-shot runs alike: the
        profile's ``agent.wrapper``, the race detector's launcher (if any), then the agent
        as its deployment runs it (itself, or through the glibc bundle's loader).
        """
        agent = self.deploy_agent()
        bundled = self.deployment().mode is Deployment.GLIBC_BUNDLE
        started = start_argv(agent) if bundled else [agent]
        race_log = self._race_log()
        detector_argv, detector_env = race_log.launch() if race_log else ((), {})
        argv = [*self.profile.agent.wrapper, *detector_argv, *started, *arguments]
        env = {**self.profile.agent.env, **detector_env}
        return argv, env or None

    def start_session(
        self, time_limit: TimeLimit | None = None, *, records: bool | None = None
    ) -> Session:
        """Start a fresh agent (a new process, or a reset board) and return its session.

        Each report is awaited for the profile's case timeout at most, and never
        beyond ``time_limit``. ``records`` overrides the profile's ``agent.records``
        (the bench measures both).
        """
        recording = self.profile.agent.records if records is None else records
        argv, env = self.agent_command(*(() if recording else ("--no-records",)))
        stream = self.transport.open_stream(argv, env=env)
        android_glibc = (
            self.deployment().mode is Deployment.NATIVE and self.profile.agent.prebuilt is None
            and self.transport.facts().os == "android"
        )  # fmt: skip
        hint = no_glibc_hint(self.profile) if android_glibc else ""
        channel = StreamChannel(
            stream,
            timeout=self.profile.timeouts.case,
            name=self.name,
            time_limit=time_limit,
            start_hint=hint,
        )
        return AgentSession(channel, name=self.name)

    def _race_log(self) -> RaceLog | None:
        """The race detector's log of this device's agents, made on first use (if any)."""
        detector = self.profile.agent.race_detector
        if detector is not None and self.race_log is None:
            if self._resources is None:
                self._resources = contextlib.ExitStack()
            directory = self._resources.enter_context(
                owned_directory(f"{self.name}-", cache_root() / "race-logs")
            )
            self.race_log = RaceLog(detector, directory)
        return self.race_log

    def program_for(self, delegates: tuple[str, ...]) -> str:
        """Device path of a program calling ``delegates``, pushed if needed.

        Delegates ending in one ``XnnpackBackend`` get the XNNPACK program (a real
        XNNPACK graph, the other delegates as probes before it); any other tuple a
        probe program.
        """
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

    def push_program(self, local: Path, inputs: Path | None = None) -> str:
        """Device path of the program file ``local``, named by its content and pushed
        unless the device has it already; with ``inputs``, the inputs file the agent
        reads beside it (``<program>.inputs``, docs/agent.md "Given inputs"), the pair
        named by both contents. The user programs kept on the device stay within
        :data:`USER_PROGRAMS_BOUND` bytes, the least recently used removed first."""
        digest = _sha256(local)
        if inputs is not None:
            digest = hashlib.sha256(f"{digest} {_sha256(inputs)}".encode()).hexdigest()
        remote = posixpath.join(
            self.work_dir, "programs", f"{USER_PROGRAM_PREFIX}{digest[:16]}.pte"
        )
        pairs = [(local, remote)] + ([(inputs, remote + INPUTS_SUFFIX)] if inputs else [])
        self.push_each_once(pairs)
        keep_bounded(self.transport, remote, USER_PROGRAMS_BOUND, self.profile.timeouts.command)
        return remote

    def forget_program(self, remote: str) -> None:
        """Remove the program file at ``remote`` (a load said it is damaged), and any
        inputs file beside it."""
        beside = remote + INPUTS_SUFFIX
        self._pushed.pop(remote, None)
        self._pushed.pop(beside, None)
        self.remove_file(remote, beside)

    has_files = True

    def file_exists(self, remote: str) -> bool:
        """Whether a regular file is at ``remote`` (``test -f``, through the transport)."""
        result = self.transport.run(["test", "-f", remote], timeout=self.profile.timeouts.command)
        return result.exit_code == 0

    def remove_file(self, *remotes: str) -> None:
        """Remove the files at ``remotes``, those there are (``rm -f``)."""
        self.transport.run(["rm", "-f", "--", *remotes], timeout=self.profile.timeouts.command)

    def collect_artifacts(self, dest: Path) -> list[Path]:
        """Core files the agent left in the work directory (:mod:`harness.devices.core_files`),
        none from a device that cannot be reached any more; and the serial console's log of
        an emulated board that has one (linux-emu: what it printed, up to a power cut)."""
        kept = self.copy_console_log(dest)
        try:
            work_dir = self.work_dir
        except TransportError:
            return kept
        return kept + collect_core_files(
            self.transport, work_dir, dest, self.profile.timeouts.command
        )

    def close(self) -> None:
        """Release the transport and stop the emulator, if the harness started one."""
        try:
            self.transport.close()
        finally:
            super().close()


def emulator_home(profile: DeviceProfile, resources: contextlib.ExitStack) -> Path:
    """A private directory for one emulated device, removed when the device closes."""
    return resources.enter_context(owned_directory(f"{profile.name}-", cache_root() / "emulators"))


def with_settings(profile: DeviceProfile, **settings: object) -> DeviceProfile:
    """``profile`` with transport fields an emulator provides added."""
    return dataclasses.replace(profile, settings={**profile.settings, **settings})
