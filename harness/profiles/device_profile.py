"""Device profiles: YAML files in ``devices/`` that say where a device is and how to use it.

A profile maps one-to-one onto :class:`DeviceProfile`. Every field, the agent and timeouts
sections included, is checked by the one settings validator (:mod:`.settings`) against
``_PROFILE_FIELDS``; the rules between fields run after it (``_after_the_fields``). Every
error names the file and the field. See docs/device-profiles.md for the format.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.codec.strict_yaml import read_yaml
from harness.lifecycle.cache import cache_root
from harness.profiles.device_folders import (
    DeviceFolder,
    listing,
    of_working_directory,
    with_built_in,
)
from harness.profiles.kinds import (
    RENAMED_EMULATORS,
    UnknownKind,
    all_kinds,
    device_kind,
    emulators,
    kind_names,
)
from harness.profiles.mcu_boards import BOARDS, DEFAULT_MACHINE
from harness.profiles.validator import (
    Field,
    ProfileError,
    Spec,
    check_known,
    one_of,
    parse_settings,
)
from harness.runtime.choice import Runtime
from harness.runtime.firmware_tree import RuntimeSourceError, check_trusted_source
from harness.runtime.install_prefix import SdkPrefixError, check_trusted
from harness.runtime.race_detector import RaceDetector, RaceDetectorChoiceError, check_race_detector
from harness.untrusted.reading import InputFileError, brief, read_bounded_text
from harness.untrusted.trust import TRUSTED_PROFILES_ENV, profile_is_trusted
from harness.untrusted.value_rules import (
    ValueRuleError,
    check_line,
    check_name,
    check_path_fits,
    check_seconds,
    check_work_dir,
    real_path,
)

DEFAULT_WORK_DIR = "/tmp/et-harness"
# agent.deployment: how the agent runs (harness/devices/deployment.py); auto asks the device.
DEPLOYMENT_MODES = ("auto", "native", "glibc-bundle")


@dataclass(frozen=True)
class Timeouts:
    """Seconds allowed for each layer of work on the device."""

    connect: float = 20.0
    command: float = 120.0
    case: float = 30.0


@dataclass(frozen=True)
class AgentConfig:
    """How the device agent process is started."""

    env: Mapping[str, str] = field(default_factory=dict)
    wrapper: tuple[str, ...] = ()
    prebuilt: Path | None = None  # an agent built elsewhere (e.g. with the Android NDK)
    sdk: Path | None = None  # an ExecuTorch install prefix to build the agent against
    source: Path | None = None  # an ExecuTorch source tree the MCU firmware compiles (mcu-emu)
    deployment: str = "auto"  # one of DEPLOYMENT_MODES
    race_detector: RaceDetector | None = None  # harness/runtime/race_detector.py; host only
    records: bool = True  # the agent records the real backends' calls (docs/agent.md)
    # The runtime the run tests on this device (--runtime); never a profile's field.
    runtime: Runtime | None = None


@dataclass(frozen=True)
class DeviceProfile:
    """One device, as a profile file describes it."""

    name: str
    path: Path | None
    kind: str  # transport.kind: the device's kind (harness/devices/<kind>.py)
    settings: Mapping[str, Any]  # the transport's own fields, checked by the transport
    description: str = ""
    abi: str | None = None
    work_dir: str = DEFAULT_WORK_DIR
    agent: AgentConfig = AgentConfig()
    emulator: str | None = None
    machine: str | None = None  # the board mcu-emu emulates (harness/profiles/mcu_boards.py)
    backends: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    timeouts: Timeouts = Timeouts()

    def where(self, field_path: str) -> str:
        """``devices/x.yaml: transport.port`` for error messages."""
        return f"{self.path or self.name}: {field_path}"


_SOURCE_MEANS = "the path of an ExecuTorch source tree (a checkout with third-party/flatbuffers)"


def _check_source_path(value: object) -> None:
    if isinstance(value, str) and not value:  # a NUL byte is every string field's refusal
        raise ValueRuleError(f"must be {_SOURCE_MEANS}, not empty; got {brief(value)}")


def _check_env_name(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueRuleError(
            "not a valid environment variable name (letters, digits and _; not starting "
            "with a digit)"
        )


# What a profile file may set, and the rule of each value; the validator
# (config/settings.py) checks them all, and _after_the_fields the rules between fields.
_AGENT_FIELDS: dict[str, Spec] = {
    "env": Field(key=_check_env_name, means="a mapping of variable names to strings"),
    "wrapper": Field(means="a list of arguments, e.g. [valgrind, --error-exitcode=1]"),
    "prebuilt": Field(means="the path of a directory holding et-agent and its libraries"),
    "sdk": Field(
        means="the path of an ExecuTorch install prefix (include/, lib/, its CMake package)"
    ),
    "deployment": one_of(DEPLOYMENT_MODES, "auto asks the device"),
    "race_detector": Field(later=True),  # which detector depends on the device
    "records": Field(
        means="true (record the real backends' calls, the default) or false (forward them only)"
    ),
    "source": Field(rule=_check_source_path, means=_SOURCE_MEANS),
}
_PROFILE_FIELDS: dict[str, Spec] = {
    "name": Field(rule=check_name, means="a non-empty string"),  # as the rule words it
    "description": check_line,
    "transport": Field(later=True),  # its kind chooses the settings class: devices/<kind>.py
    "abi": None,
    "work_dir": Field(
        rule=check_work_dir,
        means="a non-empty string (give the absolute path of a directory of its own)",
    ),
    "agent": Field(section=_AGENT_FIELDS),
    "emulator": Field(later=True),  # only its kind's own emulator (harness/devices/<kind>.py)
    "machine": one_of(sorted(BOARDS)),
    "backends": None,
    "tags": None,
    "timeouts": Field(
        means="a mapping of seconds",
        section=dict.fromkeys(("connect", "command", "case"), check_seconds),
    ),
}


def profile_names(folders: Sequence[DeviceFolder] | None = None) -> list[str]:
    """Names of the profiles in ``folders`` (None: the working directory's project's
    folders, then the built-in one; :mod:`harness.profiles.device_folders`)."""
    return [found.name for found in listing(_folders(folders))]


def _folders(folders: Sequence[DeviceFolder] | None) -> Sequence[DeviceFolder]:
    return with_built_in(of_working_directory(Path.cwd())) if folders is None else folders


def resolve(spec: str, folders: Sequence[DeviceFolder] | None = None) -> Path:
    """A device name, looked up in ``folders`` (see :func:`profile_names`), or a path to a
    YAML file."""
    candidate = Path(spec)
    if candidate.suffix in (".yaml", ".yml") or "/" in spec:
        try:
            check_path_fits(spec)
        except ValueRuleError as exc:
            raise ProfileError(str(exc)) from None
        if not candidate.exists():
            raise ProfileError(f"{spec}: no such profile file")
        if not candidate.is_file():
            raise ProfileError(f"{spec}: not a file; give the path of a YAML profile")
        return candidate
    for folder in _folders(folders):
        path = folder.path / f"{spec}.yaml"
        if path.is_file():
            return path
    raise ProfileError(
        f"unknown device {brief(spec)}: known devices: {', '.join(profile_names(folders))} "
        "(or give a path to a YAML profile)"
    )


def load_profile(spec: str, folders: Sequence[DeviceFolder] | None = None) -> DeviceProfile:
    """Load and validate the profile named (in ``folders``, see :func:`profile_names`) or
    pointed to by ``spec``."""
    path = resolve(spec, folders)
    try:
        data = read_yaml(read_bounded_text(path), str(path))
    except InputFileError as exc:  # YamlError is one
        raise ProfileError(str(exc)) from None
    return parse_profile(data, path)


def parse_profile(data: object, path: Path | None, default_name: str = "") -> DeviceProfile:
    """Validate profile data (as loaded from YAML) into a :class:`DeviceProfile`."""
    src = str(path) if path else default_name or "<profile>"
    if not isinstance(data, dict):
        raise ProfileError(f"{src}: a profile is a mapping of fields; got {type(data).__name__}")
    check_known(data, _PROFILE_FIELDS, f"{src}:")
    transport = data.get("transport")
    if not isinstance(transport, dict) or "kind" not in transport:
        raise ProfileError(
            f"{src}: transport: required, a mapping with 'kind' (one of {', '.join(kind_names())})"
        )
    kind = transport["kind"]
    try:
        device_kind(kind)
    except UnknownKind as exc:
        raise ProfileError(f"{src}: transport.kind: {brief(kind)} {exc}") from None
    named: dict[str, Any] = {} if "name" in data else {"name": path.stem if path else default_name}
    profile = parse_settings(
        DeviceProfile,
        data,
        f"{src}:",
        fields=_PROFILE_FIELDS,
        base=path.parent if path else Path.cwd(),
        path=path,
        kind=kind,
        settings={k: v for k, v in transport.items() if k != "kind"},
        **named,
    )
    return _after_the_fields(profile, data, src)


def _after_the_fields(profile: DeviceProfile, data: dict, src: str) -> DeviceProfile:
    """The rules between fields, once each field has passed its own; the defaults that
    depend on other fields."""
    if "name" not in data:
        try:
            check_name(profile.name)
        except ValueRuleError as exc:
            raise ProfileError(f"{src}: name (taken from the file name): {exc}") from None
    kind, spec = profile.kind, device_kind(profile.kind)
    emulator = _emulator(data, src)
    own = (spec.emulator, *spec.more_emulators)
    if emulator is not None and emulator not in own:
        others = emulators()
        if not isinstance(emulator, str) or emulator not in others:
            raise ProfileError(
                f"{src}: emulator: {brief(emulator)} is not one of {', '.join(others)}"
            )
        raise ProfileError(
            f"{src}: emulator: {emulator} emulates a device reached over "
            f"{others[emulator].name}, not over {kind}; remove 'emulator' or set "
            f"transport.kind: {others[emulator].name}"
        )
    emulator = None if emulator is None else own[own.index(emulator)]
    if profile.agent.source is not None and emulator != "mcu-emu":
        raise ProfileError(
            f"{src}: agent.source: only an emulated board (emulator: mcu-emu) has its firmware "
            "built here; remove agent.source or set emulator: mcu-emu"
        )
    if profile.machine is not None and emulator != "mcu-emu":
        raise ProfileError(
            f"{src}: machine: only the mcu-emu emulator takes a machine; remove it or set "
            "emulator: mcu-emu"
        )
    agent_data = data.get("agent", {})
    agent = _agent_after_the_fields(profile.agent, src)
    try:
        race_detector = check_race_detector(
            agent_data.get("race_detector"),
            src,
            kind,
            emulator,
            agent.prebuilt is not None,
            # every kind's module is imported for this only when the field is given
            tuple(k.name for k in all_kinds() if k.on_this_machine)
            if agent_data.get("race_detector") is not None
            else (),
        )
    except RaceDetectorChoiceError as exc:
        raise ProfileError(str(exc)) from None
    if spec.on_this_machine or emulator is not None:
        _check_trusted_for_this_machine(agent_data, src, profile.path)
    return dataclasses.replace(
        profile,
        agent=dataclasses.replace(agent, race_detector=race_detector),
        emulator=emulator,
        machine=profile.machine or (DEFAULT_MACHINE if emulator == "mcu-emu" else None),
        work_dir=_work_dir(profile, "work_dir" in data),
    )


# Agent fields that run things where the agent runs: on this machine, for a local or
# emulated device.
_RUNS_THINGS = ("wrapper", "env", "prebuilt")


def _check_trusted_for_this_machine(agent: dict, src: str, path: Path | None) -> None:
    """Refuse agent fields that would run code here, unless the user trusts the file."""
    used = [key for key in _RUNS_THINGS if key in agent]
    if used and not profile_is_trusted(path):
        raise ProfileError(
            f"{src}: agent.{used[0]}: this device is this machine (local or emulated), so "
            f"the field runs things here and is honoured only in a trusted profile; if you "
            f"trust this file, add it (or its directory) to {TRUSTED_PROFILES_ENV} "
            f"(paths separated by '{os.pathsep}') in your environment"
        )


def _emulator(data: dict, src: str) -> object:
    """The profile's ``emulator``, an old name read as its new one (with a deprecation note)."""
    emulator = data.get("emulator")
    if isinstance(emulator, str) and emulator in RENAMED_EMULATORS:
        new = RENAMED_EMULATORS[emulator]
        warnings.warn(
            f"{src}: emulator: {emulator} is now called {new}; write emulator: {new}",
            FutureWarning,
            stacklevel=4,  # the caller of parse_profile
        )
        return new
    return emulator


def _work_dir(profile: DeviceProfile, given: bool) -> str:
    """The profile's work_dir; if it gives none, a directory of the user's own for a device
    that is this machine (not a shared /tmp), else the default."""
    if not given and device_kind(profile.kind).on_this_machine:
        return str(cache_root() / "host-work" / profile.name)
    return profile.work_dir


def _agent_after_the_fields(agent: AgentConfig, src: str) -> AgentConfig:
    """The agent section's rules between fields; its paths resolved, the SDK and the source
    tree trusted."""
    if agent.deployment == "glibc-bundle" and agent.prebuilt is not None:
        raise ProfileError(
            f"{src}: agent.deployment: glibc-bundle bundles the harness's own aarch64 build; "
            "agent.prebuilt is run as it was built: remove one of them"
        )
    if agent.sdk is not None and agent.prebuilt is not None:
        raise ProfileError(
            f"{src}: agent.sdk: a prebuilt agent is not built here; give agent.prebuilt or "
            "agent.sdk, not both"
        )
    sdk = None
    if agent.sdk is not None:
        try:
            sdk = check_trusted(agent.sdk, f"{src}: agent.sdk")
        except SdkPrefixError as exc:
            raise ProfileError(str(exc)) from None
    source = None
    if agent.source is not None:
        try:
            source = check_trusted_source(agent.source, f"{src}: agent.source")
        except RuntimeSourceError as exc:
            raise ProfileError(str(exc)) from None
    prebuilt = real_path(agent.prebuilt) if agent.prebuilt is not None else None
    return dataclasses.replace(agent, prebuilt=prebuilt, sdk=sdk, source=source)
