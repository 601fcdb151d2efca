"""Device profiles: YAML files in ``devices/`` that say where a device is and how to use it.

A profile maps one-to-one onto :class:`DeviceProfile`; every error names the file
and the field. See docs/device-profiles.md for the format.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agent.race_detector import RaceDetector, RaceDetectorChoiceError, check_race_detector
from harness.agent.runtime_source import RuntimeSourceError, check_trusted_source
from harness.agent.sdk_prefix import SdkPrefixError, check_trusted
from harness.codec.strict_yaml import read_yaml
from harness.config.kinds import EMULATORS, KINDS
from harness.config.mcu_boards import BOARDS, DEFAULT_MACHINE
from harness.config.settings import ProfileError, check_known, parse_settings
from harness.lifecycle.cache import cache_root
from harness.untrusted.reading import InputFileError, brief, read_bounded_text
from harness.untrusted.trust import SHIPPED_DEVICES_DIR, TRUSTED_PROFILES_ENV, profile_is_trusted
from harness.untrusted.value_rules import ValueRuleError, check_name, check_seconds, check_work_dir

DEVICES_DIR = SHIPPED_DEVICES_DIR

TRANSPORT_KINDS = tuple(KINDS)
EMULATOR_KINDS = tuple(EMULATORS)
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
    source: Path | None = None  # an ExecuTorch source tree the MCU firmware compiles (qemu-mcu)
    deployment: str = "auto"  # one of DEPLOYMENT_MODES
    race_detector: RaceDetector | None = None  # harness/agent/race_detector.py; host only
    records: bool = True  # the agent records the real backends' calls (docs/agent.md)


@dataclass(frozen=True)
class DeviceProfile:
    """One device, as a profile file describes it."""

    name: str
    path: Path | None
    transport: str
    settings: Mapping[str, Any]  # the transport's own fields, checked by the transport
    description: str = ""
    abi: str | None = None
    work_dir: str = DEFAULT_WORK_DIR
    agent: AgentConfig = AgentConfig()
    emulator: str | None = None
    machine: str | None = None  # the board qemu-mcu emulates (harness/config/mcu_boards.py)
    backends: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    timeouts: Timeouts = Timeouts()

    def where(self, field_path: str) -> str:
        """``devices/x.yaml: transport.port`` for error messages."""
        return f"{self.path or self.name}: {field_path}"


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_AGENT_FIELDS = (
    "env",
    "wrapper",
    "prebuilt",
    "sdk",
    "source",
    "deployment",
    "race_detector",
    "records",
)
_TOP_FIELDS = {
    "name",
    "description",
    "transport",
    "abi",
    "work_dir",
    "agent",
    "emulator",
    "machine",
    "backends",
    "tags",
    "timeouts",
}


def profile_names() -> list[str]:
    """Names of the profiles shipped in ``devices/``."""
    return sorted(p.stem for p in DEVICES_DIR.glob("*.yaml"))


def resolve(spec: str) -> Path:
    """A profile name from ``devices/`` or a path to a YAML file."""
    candidate = Path(spec)
    if candidate.suffix in (".yaml", ".yml") or "/" in spec:
        if not candidate.exists():
            raise ProfileError(f"{spec}: no such profile file")
        if not candidate.is_file():
            raise ProfileError(f"{spec}: not a file; give the path of a YAML profile")
        return candidate
    shipped = DEVICES_DIR / f"{spec}.yaml"
    if not shipped.is_file():
        raise ProfileError(
            f"unknown device {brief(spec)}: no {shipped}; known devices: "
            f"{', '.join(profile_names())} (or give a path to a YAML profile)"
        )
    return shipped


def load_profile(spec: str) -> DeviceProfile:
    """Load and validate the profile named or pointed to by ``spec``."""
    path = resolve(spec)
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
    check_known(data, _TOP_FIELDS, f"{src}:")
    name = _str(data, "name", src, default=path.stem if path else default_name)
    try:
        check_name(name)
    except ValueRuleError as exc:
        field = "name" if "name" in data else "name (taken from the file name)"
        raise ProfileError(f"{src}: {field}: {exc}") from None
    transport = data.get("transport")
    if not isinstance(transport, dict) or "kind" not in transport:
        raise ProfileError(
            f"{src}: transport: required, a mapping with 'kind' "
            f"(one of {', '.join(TRANSPORT_KINDS)})"
        )
    kind = transport["kind"]
    if kind not in TRANSPORT_KINDS:
        raise ProfileError(
            f"{src}: transport.kind: {brief(kind)} is not one of {', '.join(TRANSPORT_KINDS)}"
        )
    emulator = data.get("emulator")
    if emulator is not None and emulator not in EMULATOR_KINDS:
        raise ProfileError(
            f"{src}: emulator: {brief(emulator)} is not one of {', '.join(EMULATOR_KINDS)}"
        )
    if emulator is not None and EMULATORS[emulator].name != kind:
        raise ProfileError(
            f"{src}: emulator: {emulator} emulates a device reached over "
            f"{EMULATORS[emulator].name}, not over {kind}; remove 'emulator' or set "
            f"transport.kind: {EMULATORS[emulator].name}"
        )
    agent_data = data.get("agent", {})
    agent = _agent(agent_data, src, path.parent if path else Path.cwd())
    try:
        race_detector = check_race_detector(
            agent_data.get("race_detector"),
            src,
            kind,
            emulator,
            agent.prebuilt is not None,
            tuple(k.name for k in KINDS.values() if k.on_this_machine),
        )
    except RaceDetectorChoiceError as exc:
        raise ProfileError(str(exc)) from None
    agent = dataclasses.replace(agent, race_detector=race_detector)
    if KINDS[kind].on_this_machine or emulator is not None:
        _check_trusted_for_this_machine(agent_data, src, path)
    machine = _machine(data, emulator, src)
    if agent.source is not None and emulator != "qemu-mcu":
        raise ProfileError(
            f"{src}: agent.source: only an emulated board (emulator: qemu-mcu) has its firmware "
            "built here; remove agent.source or set emulator: qemu-mcu"
        )
    return DeviceProfile(
        name=name,
        path=path,
        transport=kind,
        settings={k: v for k, v in transport.items() if k != "kind"},
        description=_str(data, "description", src, default=""),
        abi=_str(data, "abi", src, default=None),
        work_dir=_work_dir(data, src, kind, name),
        agent=agent,
        emulator=emulator,
        machine=machine,
        backends=_str_list(data, "backends", src),
        tags=_str_list(data, "tags", src),
        timeouts=_timeouts(data.get("timeouts", {}), src),
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


def _machine(data: dict, emulator: str | None, src: str) -> str | None:
    """The qemu-mcu board: ``machine`` if given, else the default board; None for others."""
    if "machine" not in data:
        return DEFAULT_MACHINE if emulator == "qemu-mcu" else None
    machine = data["machine"]
    if emulator != "qemu-mcu":
        raise ProfileError(
            f"{src}: machine: only the qemu-mcu emulator takes a machine; remove it or set "
            "emulator: qemu-mcu"
        )
    if machine not in BOARDS:
        raise ProfileError(
            f"{src}: machine: {brief(machine)} is not one of {', '.join(sorted(BOARDS))}"
        )
    return str(machine)


def _str(data: dict, key: str, src: str, default: Any) -> Any:
    value = data.get(key, default)
    if value is not default and not isinstance(value, str):
        raise ProfileError(f"{src}: {key}: must be a string; got {brief(value)}")
    return value


def _work_dir(data: dict, src: str, kind: str, name: str) -> str:
    if "work_dir" not in data:
        if KINDS[kind].on_this_machine:  # a directory of the user's own, not a shared /tmp
            return str(cache_root() / "host-work" / name)
        return DEFAULT_WORK_DIR
    try:
        return check_work_dir(data["work_dir"])
    except ValueRuleError as exc:
        raise ProfileError(f"{src}: work_dir: {exc}") from None


def _str_list(data: dict, key: str, src: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProfileError(f"{src}: {key}: must be a list of strings; got {brief(value)}")
    return tuple(value)


def _agent(data: object, src: str, base: Path) -> AgentConfig:
    if not isinstance(data, dict):
        raise ProfileError(
            f"{src}: agent: must be a mapping of env, wrapper, prebuilt, sdk, source, "
            "deployment, race_detector, records"
        )
    check_known(data, _AGENT_FIELDS, f"{src}: agent")
    deployment = data.get("deployment", "auto")
    if deployment not in DEPLOYMENT_MODES:
        raise ProfileError(
            f"{src}: agent.deployment: {brief(deployment)} is not one of "
            f"{', '.join(DEPLOYMENT_MODES)} (auto asks the device)"
        )
    if deployment == "glibc-bundle" and data.get("prebuilt") is not None:
        raise ProfileError(
            f"{src}: agent.deployment: glibc-bundle bundles the harness's own aarch64 build; "
            "agent.prebuilt is run as it was built: remove one of them"
        )
    prebuilt = data.get("prebuilt")
    if prebuilt is not None and not isinstance(prebuilt, str):
        raise ProfileError(
            f"{src}: agent.prebuilt: must be the path of a directory holding et-agent and its "
            f"libraries; got {brief(prebuilt)}"
        )
    sdk = data.get("sdk")
    if sdk is not None and not isinstance(sdk, str):
        raise ProfileError(
            f"{src}: agent.sdk: must be the path of an ExecuTorch install prefix (include/, "
            f"lib/, its CMake package); got {sdk!r}"
        )
    if sdk is not None and prebuilt is not None:
        raise ProfileError(
            f"{src}: agent.sdk: a prebuilt agent is not built here; give agent.prebuilt or "
            "agent.sdk, not both"
        )
    sdk_path = None
    if sdk is not None:
        try:
            sdk_path = check_trusted(base / Path(sdk).expanduser(), f"{src}: agent.sdk")
        except SdkPrefixError as exc:
            raise ProfileError(str(exc)) from None
    source = data.get("source")
    if source is not None and (not isinstance(source, str) or not source or "\0" in source):
        raise ProfileError(
            f"{src}: agent.source: must be the path of an ExecuTorch source tree (a checkout "
            f"with third-party/flatbuffers); got {brief(source)}"
        )
    source_path = None
    if source is not None:
        try:
            source_path = check_trusted_source(
                base / Path(source).expanduser(), f"{src}: agent.source"
            )
        except RuntimeSourceError as exc:
            raise ProfileError(str(exc)) from None
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, (str, int)) and not isinstance(v, bool)
        for k, v in env.items()
    ):
        raise ProfileError(
            f"{src}: agent.env: must map variable names to strings; got {brief(env)}"
        )
    for key in env:
        if not _ENV_NAME.fullmatch(key):
            raise ProfileError(
                f"{src}: agent.env.{key}: not a valid environment variable name "
                "(letters, digits and _; not starting with a digit)"
            )
    wrapper = data.get("wrapper", [])
    if isinstance(wrapper, str):
        raise ProfileError(
            f"{src}: agent.wrapper: must be a list of arguments, e.g. "
            f"[valgrind, --error-exitcode=1]; got the string {brief(wrapper)}"
        )
    if not isinstance(wrapper, list) or not all(isinstance(w, str) for w in wrapper):
        raise ProfileError(f"{src}: agent.wrapper: must be a list of strings; got {brief(wrapper)}")
    records = data.get("records", True)
    if not isinstance(records, bool):
        raise ProfileError(
            f"{src}: agent.records: must be true (record the real backends' calls, the "
            f"default) or false (forward them only); got {brief(records)}"
        )
    return AgentConfig(
        env={k: str(v) for k, v in env.items()},
        wrapper=tuple(wrapper),
        prebuilt=(base / Path(prebuilt).expanduser()).resolve() if prebuilt else None,
        sdk=sdk_path,
        source=source_path,
        deployment=deployment,
        records=records,
    )


def _timeouts(data: object, src: str) -> Timeouts:
    if not isinstance(data, dict):
        raise ProfileError(f"{src}: timeouts: must be a mapping of seconds")
    return parse_settings(
        Timeouts,
        data,
        f"{src}: timeouts",
        fields=dict.fromkeys(("connect", "command", "case"), check_seconds),
    )
