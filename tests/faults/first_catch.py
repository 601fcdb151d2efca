"""A pytest plugin for the suite runs that measure the suites' power (``-p first_catch``).

Those runs ask of each device (one fault each) whether some test catches its fault: so a
device's tests stop at its first failure, and the rest of them are skipped. A device
that never fails (the inert shim, a fault no suite catches) runs every test.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from harness.pytest_plugin.stash import device_of

SKIPPED = "failed a test already: this run asks only whether one does"  # the skip's reason
_CAUGHT = pytest.StashKey[set[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_CAUGHT] = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    device = device_of(item)
    if device is not None and device in item.config.stash[_CAUGHT]:
        pytest.skip(f"{device} {SKIPPED}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    device = device_of(item)
    if device is not None and report.when == "call" and report.failed:
        item.config.stash[_CAUGHT].add(device)
    return report
