"""Whether a device runs the runtime a run chose for it (``--runtime``): one the harness
cannot build an agent for is refused before the run, and an agent that announces
another executorch version in its HELLO is refused at the health check."""

from __future__ import annotations

from harness.errors import UsageError
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.kinds import device_kind
from harness.runtime.choice import Runtime


class RuntimeNotRunning(UsageError):
    """The agent announces another executorch version than the runtime chosen for it."""


def runtime_not_served(profile: DeviceProfile, runtime: Runtime) -> str | None:
    """Why ``profile``'s device cannot run ``runtime`` (the harness does not build its agent),
    or None."""
    if not device_kind(profile.kind).builds_agent:
        return (
            f"runtime {runtime.label} is not for {profile.name}: its firmware is its agent "
            "(agent.source chooses the tree it is built from)"
        )
    if profile.agent.prebuilt is not None:
        return f"runtime {runtime.label} is not for {profile.name}: it runs a prebuilt agent"
    return None


def check_announced_runtime(device: str, runtime: Runtime | None, announced: str) -> None:
    """Refuse an agent that runs another version than the pinned wheel it was built for
    (1.5.0's libraries are 1.5.1's but for one: HELLO must tell them apart)."""
    expected = runtime.wheel_version if runtime is not None else None
    if runtime is None or expected is None or announced == f"executorch {expected}":
        return
    raise RuntimeNotRunning(
        f"device {device!r} was to run executorch {expected} (--runtime "
        f"{runtime.entry}), but its agent announces {announced or 'no runtime'}; clear "
        "its agent build from the harness cache and run again"
    )
