"""The boards the mcu-emu emulator can be: QEMU machine, CPU and firmware build per board.

A profile names one with ``machine:`` (default :data:`DEFAULT_MACHINE`); the
firmware in ``agent/mcu`` is built once per board (``make BOARD=<machine>``, its
``boards/<machine>/`` directory holds the board's addresses and memory layout).
See docs/mcu.md for each board's RAM, flash and capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import UsageError


@dataclass(frozen=True)
class McuBoard:
    """One emulated board."""

    machine: str  # QEMU's -M value, also the firmware's BOARD
    cpu: str  # the core, as -mcpu spells it
    abi: str  # the firmware's abi fact
    description: str


BOARDS: dict[str, McuBoard] = {
    board.machine: board
    for board in (
        McuBoard("mps2-an385", "cortex-m3", "armv7m", "Arm MPS2 AN385, Cortex-M3"),
        McuBoard(
            "mps3-an547", "cortex-m55", "armv8.1m", "Arm MPS3 AN547 (Corstone-300), Cortex-M55"
        ),
    )
}
DEFAULT_MACHINE = "mps2-an385"


class UnknownBoard(ValueError, UsageError):
    """A machine name that is not one of :data:`BOARDS`."""


def board(machine: str) -> McuBoard:
    """The board QEMU emulates as ``machine``."""
    try:
        return BOARDS[machine]
    except KeyError:
        raise UnknownBoard(
            f"no MCU board {machine!r}; known: {', '.join(sorted(BOARDS))}"
        ) from None
