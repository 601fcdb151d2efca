"""A pytest plugin for the suite runs that measure the suites' power (``-p first_catch``).

Those runs ask of each device (one fault each) whether some test catches its fault: so a
device's tests stop at its first failure, and the rest of them are skipped. A device
that never fails (the inert shim, a fault no suite catches) runs every test.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from harness.pytest_plugin import DEVICE_PARAM

SKIPPED = "failed a test already: this run asks only whether one does"  # the skip's reason
_CAUGHT = pytest.StashKey[set[str]]()


def _device(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(DEVICE_PARAM) if callspec is not None else None


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_CAUGHT] = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    device = _device(item)
    if device is not None and device in item.config.stash[_CAUGHT]:
        pytest.skip(f"{device} {SKIPPED}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    device = _device(item)
    if device is not None and report.when == "call" and report.failed:
        item.config.stash[_CAUGHT].add(device)
    return report
