"""What the pytest plugin keeps on pytest's config and on each test item, and how a
test item finds its device: shared by :mod:`harness.pytest_plugin` (options, fixtures)
and :mod:`harness.pytest_plugin.per_test` (each test's run and report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.check import Verdict
from harness.check.option_outcomes import OptionOutcome
from harness.farm.run_slots import DeviceSlots
from harness.farm.slot import AfterFailure, DeviceSlot
from harness.results.artifacts import CrashArtifacts

DEVICE_PARAM = "device_profile"  # the fixture every device test depends on
RUNTIME_PARAM = "et_runtime"  # parametrized by --runtime; device_profile depends on it

SLOTS = pytest.StashKey[DeviceSlots]()
RESULTS_DIR = pytest.StashKey[Path]()
VERDICTS = pytest.StashKey[list[Verdict]]()  # per test
OPTIONS = pytest.StashKey[list[OptionOutcome]]()  # per test: what its options did
FAILED_TRIES = pytest.StashKey[list[BaseException]]()  # per test
COUNTS_AS_INFRA = pytest.StashKey[bool]()  # per test: towards quarantine
ARTIFACTS = pytest.StashKey[CrashArtifacts]()  # per test


def device_of(item: pytest.Item) -> str | None:
    """The name of the device ``item`` runs on, or None for a test without one."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(DEVICE_PARAM) if callspec is not None else None


def runtime_of(item: pytest.Item) -> str:
    """The label of the runtime ``item`` runs (``--runtime``), or "" (the device's own)."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(RUNTIME_PARAM, "") if callspec is not None else ""


def slot_of(item: pytest.Item) -> DeviceSlot | None:
    name = device_of(item)
    return item.config.stash[SLOTS][(name, runtime_of(item))] if name is not None else None


def keep_artifacts(item: pytest.Item, slot: DeviceSlot) -> AfterFailure:
    """What to do after a failed try of ``item``: keep what a lost agent left behind."""
    if ARTIFACTS not in item.stash:
        item.stash[ARTIFACTS] = CrashArtifacts(item.config.stash[RESULTS_DIR], slot.name, item.name)
    artifacts = item.stash[ARTIFACTS]
    return lambda exc, attempt: artifacts.after_failure(exc, attempt, slot.collect_artifacts)
