"""How the agent runs on a device: as it was built, or as a glibc bundle.

``native``: the agent and its libraries are pushed and the agent is run as it is (the
host, glibc Linux boards, an NDK build given as ``agent.prebuilt``). ``glibc-bundle``:
the aarch64 glibc agent is pushed with its own loader and glibc
(:mod:`harness.runtime.glibc_bundle`) and started through that loader, for aarch64
devices that have no glibc, such as Android phones. The profile's
``agent.deployment`` chooses, or ``auto`` (the default) asks the device:
an Android device (``getprop`` answers) with ``/system/bin/linker64`` and without
``/lib/ld-linux-aarch64.so.1`` gets the bundle; every other device runs natively.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from harness.profiles.device_profile import DeviceProfile
from harness.runtime.glibc_bundle import LOADER_NAME
from harness.transport.base import Transport, TransportError

BIONIC_LINKER = "/system/bin/linker64"
GLIBC_LOADER = f"/lib/{LOADER_NAME}"

# A fixed script: nothing from a profile or the device goes into it.
_PROBE_SCRIPT = (
    f"for f in {BIONIC_LINKER} {GLIBC_LOADER}; do "
    'if [ -e "$f" ]; then echo "have $f"; else echo "no $f"; fi; done; '
    'echo "sdk $(getprop ro.build.version.sdk)"'
)


class Deployment(enum.Enum):
    """The two ways an agent is started."""

    NATIVE = "native"
    GLIBC_BUNDLE = "glibc-bundle"


@dataclass(frozen=True)
class DeploymentChoice:
    """The mode a device uses, and why (shown in reports)."""

    mode: Deployment
    reason: str

    def describe(self) -> str:
        return f"{self.mode.value} ({self.reason})"


def choose_deployment(profile: DeviceProfile, transport: Transport) -> DeploymentChoice:
    """The profile's ``agent.deployment``, or for ``auto`` what the device says."""
    wanted = profile.agent.deployment
    if profile.agent.prebuilt is not None:
        return DeploymentChoice(Deployment.NATIVE, "agent.prebuilt is run as it was built")
    if wanted != "auto":
        where = profile.path or profile.name
        return DeploymentChoice(Deployment(wanted), f"agent.deployment in {where}")
    facts = transport.facts()
    if facts.os != "android":
        return DeploymentChoice(Deployment.NATIVE, f"a {facts.os} device")
    return _ask_android(transport, profile.timeouts.connect)


def _ask_android(transport: Transport, timeout: float) -> DeploymentChoice:
    result = transport.run(["sh", "-c", _PROBE_SCRIPT], timeout=timeout)
    lines = [line.partition(" ") for line in result.stdout.decode("utf-8", "replace").splitlines()]
    present = {path: state == "have" for state, _, path in lines if state in ("have", "no")}
    if result.exit_code != 0 or GLIBC_LOADER not in present:
        raise TransportError(
            f"asking the device how to run the agent failed (exit {result.exit_code}): "
            f"{result.stderr.decode('utf-8', 'replace').strip()[-300:]}"
        )
    sdk = next((rest.strip() for state, _, rest in lines if state == "sdk"), "")
    said = f"Android SDK {sdk or '?'}, " + ", ".join(
        path if present.get(path) else f"no {path}" for path in (BIONIC_LINKER, GLIBC_LOADER)
    )
    mode = Deployment.NATIVE if present[GLIBC_LOADER] else Deployment.GLIBC_BUNDLE
    return DeploymentChoice(mode, f"device: {said}")


def no_glibc_hint(profile: DeviceProfile) -> str:
    """What to do when a glibc agent started natively on an Android device dies at once."""
    return (
        f"{profile.where('agent.deployment')}: the agent is a glibc program and this Android "
        f"device has no glibc loader ({GLIBC_LOADER}); use agent.deployment: glibc-bundle "
        "(or auto) to push the agent with its own loader, or give agent.prebuilt an NDK "
        "build (agent/cmake/android-arm64.md)"
    )
