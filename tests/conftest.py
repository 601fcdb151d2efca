"""Fixtures shared by the project's tests of the MCU firmware."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.emulators.qemu_mcu import QemuMcu, build_firmware


@pytest.fixture(scope="session")
def firmware() -> Path:
    """The firmware image, built once (cached by content hash across runs)."""
    return build_firmware()


@pytest.fixture
def mcu(firmware: Path) -> Iterator[QemuMcu]:
    """A fresh QEMU board running the firmware, stopped after the test."""
    with QemuMcu(firmware) as running:
        yield running
