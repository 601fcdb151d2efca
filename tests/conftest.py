"""What the project's tests share (the unit tests in ``tests/unit/``, the system tests in
``tests/system/``): no run history, one object cache, the longest modules first, and the
fixtures of the system tests of the MCU firmware and its serial link: every test that uses
``firmware`` or ``mcu`` runs on each emulated board (harness/profiles/mcu_boards.py)."""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from pathlib import Path

import pytest
from serial.urlhandler import protocol_socket

from harness.emulators.mcu import McuEmulator, build_firmware
from harness.lifecycle.cache import cache_root
from harness.profiles.mcu_boards import BOARDS, McuBoard

# The project's tests and the pytest runs they start keep out of the user's run history
# (and a lab's database named by $ET_HARNESS_HISTORY); the history's own tests name a
# store of their own with --history.
os.environ["ET_HARNESS_HISTORY"] = "off"
# Every build compiles through one object cache, the run's harness cache's, also in the
# tests that give themselves a harness cache of their own (a user's CCACHE_DIR is honoured:
# harness.runtime.source_tree.compiler_cache_env).
os.environ.setdefault("CCACHE_DIR", str(cache_root() / "ccache"))

# The modules that take longest, longest first (the sum of their tests' wall time in a run
# from an empty harness cache on 2 cores, 4 December 2026: 230 s down to 36 s); every other
# module follows in file order. ci/test.sh hands xdist's workers whole modules in this
# order (--dist loadscope --no-loadscope-reorder), so that no long module starts last.
LONGEST_FIRST = (
    "test_labgrid_lab.py",
    "test_kill_runs.py",
    "test_installed_wheel.py",
    "test_source_history.py",
    "test_mcu_firmware.py",
    "test_mcu_patched_runtime.py",
    "test_mcu_faults.py",
    "test_history_runs.py",
    "test_race_detector.py",
    "test_farm_runs.py",
    "test_chaos.py",
    "test_fault_injection.py",
    "test_farm_rootdir.py",
    "test_setup_repair.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of :data:`LONGEST_FIRST` first, in its order; each module's tests in
    their own order."""
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))


@pytest.fixture(scope="session", params=sorted(BOARDS))
def mcu_board(request: pytest.FixtureRequest) -> McuBoard:
    """The emulated board (QEMU machine) a test runs on."""
    return BOARDS[request.param]


@pytest.fixture(scope="session")
def firmware(mcu_board: McuBoard) -> Path:
    """The firmware image for the board, built once (cached by content hash across runs)."""
    return build_firmware(mcu_board.machine)


@pytest.fixture
def mcu(firmware: Path, mcu_board: McuBoard) -> Iterator[McuEmulator]:
    """A fresh QEMU board running the firmware, stopped after the test."""
    with McuEmulator(firmware, machine=mcu_board.machine) as running:
        yield running


@pytest.fixture
def late_port_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a ``socket://`` port gives the peer up to 2 s to send before pyserial discards
    the input (``reset_input_buffer`` in its open): a client descheduled between connecting
    and that discard while the board boots, as under load, made certain."""
    discard = protocol_socket.Serial.reset_input_buffer

    def late(port: protocol_socket.Serial) -> None:
        select.select([port._socket], [], [], 2.0)
        discard(port)

    monkeypatch.setattr(protocol_socket.Serial, "reset_input_buffer", late)
