"""Each test's run on its device, for the pytest plugin: the deadline and the device's
health before it, a retry after device trouble, the race detector's report after it,
and its report (an infrastructure error, the device's facts, verdicts and artifacts).
Registered by :mod:`harness.pytest_plugin` (its ``pytest_plugins``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from harness.check import VerdictNotExamined
from harness.farm.device_health import DeviceQuarantined
from harness.farm.slot import FACT_KEYS, DeviceSlot
from harness.lifecycle.disk import DiskTrouble
from harness.pytest_plugin.stash import (
    ARTIFACTS,
    COUNTS_AS_INFRA,
    FAILED_TRIES,
    OPTIONS,
    RESULTS_DIR,
    SLOTS,
    VERDICTS,
    keep_artifacts,
    slot_of,
)
from harness.results.infra import describe_error, infrastructure_error
from harness.results.junit import (
    EMULATOR_RESTART_PROPERTY,
    INFRA_PHASE_PROPERTY,
    INFRA_PROPERTY,
    RUNTIME_LABEL_PROPERTY,
)
from harness.results.records import FARM_ATTR, OptionRecord, VerdictRecord, is_infrastructure_report
from harness.session.agent_requests import LoadPathNotServed
from harness.transport.base import TransportError

# ---- running: deadline, quarantine, retries ----------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.config.stash[SLOTS].policy.deadline.check()
    slot = slot_of(item)
    if slot is not None:
        slot.health.ensure_usable()
        keep_artifacts(item, slot)  # makes the test's artifact record
        slot.begin_test(item.stash[ARTIFACTS])  # a device that fails keeps its evidence there
        slot.check_if_due()


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item):
    __tracebackhide__ = True  # a race report's failure shows the report, not this hook
    slot = slot_of(item)
    failed = True
    try:
        try:
            result = yield
        except Exception as exc:
            if slot is None or infrastructure_error(exc) is None:
                raise
            verdicts = item.stash.get(VERDICTS, None)

            def again() -> None:
                if verdicts is not None:
                    verdicts.clear()
                item.stash.get(OPTIONS, []).clear()
                item.runtest()

            slot.retry(
                again, exc, item.stash.setdefault(FAILED_TRIES, []), keep_artifacts(item, slot)
            )
            result = []
        _fail_unexamined(item)
        failed = False
        return result
    finally:
        if slot is not None:
            _check_races(item, slot, fail=not failed)


def _fail_unexamined(item: pytest.Item) -> None:
    """Fail a test that left a verdict with differences unexamined, naming its call."""
    __tracebackhide__ = True
    forgotten = tuple(v for v in item.stash.get(VERDICTS, []) if v.unexamined_differences)
    if forgotten:
        raise VerdictNotExamined(forgotten)


def _check_races(item: pytest.Item, slot: DeviceSlot, fail: bool) -> None:
    """Keep what the race detector (if any) wrote during the test; fail it on a report.

    The test's agent is stopped first, so that what the detector writes at exit
    (e.g. TSAN's thread leaks) is read too, and the next test gets an agent of its
    own: a detector reports a race once per process, so each test's outcome is
    its own, whatever ran before it. ``fail`` is False when the test failed
    already: the report is kept and shown, the test's own failure stands.
    """
    __tracebackhide__ = True
    race_log = slot.device.race_log if slot.device is not None else None
    if race_log is None:
        return
    slot.restart()
    check = race_log.take()
    if not check.output:
        return
    attempt = len(item.stash.get(FAILED_TRIES, [])) + 1
    keep_artifacts(item, slot)  # makes the test's artifact record
    path = item.stash[ARTIFACTS].keep_text(
        attempt, f"{check.detector.value}-report.txt", check.artifact_text()
    )
    if fail:
        check.raise_for_findings(str(item.config.stash[RESULTS_DIR] / path))
    elif check.unsuppressed or check.broken:
        item.add_report_section("call", check.detector.value, check.artifact_text()[:4000])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, LoadPathNotServed):
        report.outcome = "skipped"  # what the runtime lacks: a skip with its reason
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {call.excinfo.value}")
    payload: dict[str, Any] = {}
    slot = slot_of(item)
    infra = infrastructure_error(call.excinfo.value) if call.excinfo is not None else None
    if infra is not None and report.failed:
        kept = item.stash.get(ARTIFACTS, None)
        message = kept.repoint(str(infra)) if kept is not None else str(infra)  # a kept file
        payload["infra"] = {"type": type(infra).__name__, "message": message, "phase": report.when}
        item.user_properties += [
            (INFRA_PROPERTY, describe_error(infra, message)),
            (INFRA_PHASE_PROPERTY, report.when),
        ]
        report.sections.append(
            (
                "device trouble",
                "infrastructure error: the device or its link failed, not the runtime under test",
            )
        )
        if isinstance(infra, TransportError) and not isinstance(infra, DeviceQuarantined):
            item.stash[COUNTS_AS_INFRA] = True
        if isinstance(infra, DiskTrouble) and slot is not None:  # said once, not per test
            slot.health.quarantine(describe_error(infra))
    if slot is not None:
        error = call.excinfo.value if call.excinfo is not None else None
        payload.update(_device_payload(item, slot, report, infra, error))
    if payload:
        setattr(report, FARM_ATTR, payload)
    return report


def _device_payload(
    item: pytest.Item,
    slot: DeviceSlot,
    report: pytest.TestReport,
    infra: BaseException | None,
    call_error: BaseException | None,
) -> dict[str, Any]:
    label = slot.runtime.label if slot.runtime is not None else ""
    payload: dict[str, Any] = {"device": slot.name, "runtime_label": label}
    # before a passed health check: the profile's ABI, and the place held (a board that
    # failed its first health check is named on every row it costs)
    facts = slot.facts or {
        **({"abi": slot.profile.abi} if slot.profile.abi else {}),
        **slot.lab_facts,
    }
    tries = item.stash.get(FAILED_TRIES, [])
    if report.when == "setup":
        item.user_properties.append(("device", slot.name))
        if label:
            item.user_properties.append((RUNTIME_LABEL_PROPERTY, label))
        item.user_properties += [(key, facts[key]) for key in FACT_KEYS if key in facts]
    if report.when in ("setup", "call") and call_error is not None:
        keep_artifacts(item, slot)(call_error, len(tries) + 1)  # unless a retry kept them
    if report.failed and not isinstance(infra, DeviceQuarantined):
        keep_artifacts(item, slot)  # the runtime's log lines go there, not in the section
        report.sections += item.stash[ARTIFACTS].stderr_sections(
            len(tries) + 1, slot.stderr_tails()
        )
    if report.when == "call":
        payload["verdicts"] = [
            dataclasses.asdict(VerdictRecord.of(v)) for v in item.stash.get(VERDICTS, [])
        ]
        payload["options"] = [
            dataclasses.asdict(OptionRecord.of(o)) for o in item.stash.get(OPTIONS, [])
        ]
    if report.when == "teardown":
        slot.health.test_ended(item.stash.get(COUNTS_AS_INFRA, False))
        payload["facts"] = facts
        payload["failed_tries"] = [describe_error(infrastructure_error(e) or e) for e in tries]
        payload["artifacts"] = item.stash[ARTIFACTS].paths if ARTIFACTS in item.stash else []
        payload["emulator_restarts"] = restarts = slot.restarts.new()
        report.user_properties += [(EMULATOR_RESTART_PROPERTY, reason) for reason in restarts]
        if tries:
            item.user_properties.append(
                ("infrastructure_retries", "; ".join(payload["failed_tries"]))
            )
    return payload


# ---- reporting ---------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    if is_infrastructure_report(report):
        return "infra", "I", ("INFRA", {"yellow": True})
    return None
