"""The devices and runtimes of a run: one :class:`~harness.farm.slot.DeviceSlot` per
device and runtime, created when a test first needs it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.farm.policy import FarmPolicy
from harness.farm.slot import DeviceSlot
from harness.profiles.device_profile import DeviceProfile
from harness.runtime.choice import Runtime

__all__ = ["DeviceSlots", "SlotKey"]

SlotKey = tuple[str, str]  # (device name, runtime label; "" for the device's own runtime)


class DeviceSlots:
    """The run's devices and runtimes; a slot, one device with one runtime, is created
    when a test first needs it."""

    def __init__(
        self,
        profiles: tuple[DeviceProfile, ...],
        policy: FarmPolicy,
        runtimes: Sequence[Runtime] = (),
    ) -> None:
        self.profiles = {profile.name: profile for profile in profiles}
        self.runtimes = {runtime.label: runtime for runtime in runtimes}
        self.policy = policy
        self.results_dir: Path | None = None  # set once known: lab holdings go there
        self._slots: dict[SlotKey, DeviceSlot] = {}

    @property
    def names(self) -> list[str]:
        return list(self.profiles)

    def __getitem__(self, key: SlotKey) -> DeviceSlot:
        if key not in self._slots:
            name, label = key
            runtime = self.runtimes[label] if label else None
            self._slots[key] = DeviceSlot(
                self.profiles[name], self.policy, self.results_dir, runtime
            )
        return self._slots[key]

    def get(self, key: SlotKey) -> DeviceSlot | None:
        """The slot of ``key`` if one was created."""
        return self._slots.get(key)

    def close(self) -> None:
        for slot in self._slots.values():
            slot.close()
