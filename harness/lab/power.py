"""A labgrid place's power switched off and on, by labgrid's own power driver, within a
time limit (a lab's switch that does not answer is the lab's trouble, said in one line)."""

from __future__ import annotations

import threading

from harness.devices.acquired_place import PowerPort
from harness.lab.client_session import LabgridError

__all__ = ["cycle_power"]

_POWER_TIMEOUT_S = 30.0


def cycle_power(place: str, port: PowerPort) -> None:
    """Switch ``place``'s power ``port`` (a ``NetworkPowerPort``) off and on."""
    failure: list[BaseException] = []

    def cycle() -> None:
        try:
            from labgrid import Target
            from labgrid.driver.powerdriver import NetworkPowerDriver
            from labgrid.resource.power import NetworkPowerPort

            target = Target(f"et-harness-{port.model}")
            NetworkPowerPort(target, None, model=port.model, host=port.host, index=port.index)
            driver = NetworkPowerDriver(target, None, delay=0.1)
            target.activate(driver)
            driver.cycle()
        except Exception as exc:  # any failure of the lab's switch is the lab's
            failure.append(exc)

    worker = threading.Thread(target=cycle, name="labgrid-power", daemon=True)
    worker.start()
    worker.join(_POWER_TIMEOUT_S)
    if worker.is_alive() or failure:
        why = f"{type(failure[0]).__name__}: {failure[0]}" if failure else "no answer"
        raise LabgridError(
            f"labgrid place {place!r}: power cycle ({port.model}) failed: "
            f"{str(why)[:300]} (within {_POWER_TIMEOUT_S:g} s)"
        )
