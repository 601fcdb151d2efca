"""Additions to pytest's JUnit XML (``--junitxml``) for device-farm runs.

pytest writes a failing test's call phase as ``<failure>``. For infrastructure
errors that is wrong: :func:`amend_junit` turns them into ``<error>`` with the
exception's ``type`` and ``message`` (fixing the suite's counts), and adds the
run's devices with their HELLO facts as ``<testsuite>`` properties
(``device.NAME.load_paths`` the paths its agent announces, ``device.NAME.real_backends``
the registered backends that are not probes) and ``device.NAME.paths_served``, the
load paths its verdicts went through; in a run across runtimes (``--runtime``) each
device is there once per runtime, ``device.NAME@LABEL.KEY``, and ``runtimes`` lists the
labels. Each test case already carries ``device``, ``runtime_label`` (with
``--runtime``), ``abi``, ``runtime`` (what HELLO announces), ``agent_version``,
``load_paths`` and ``real_backends`` properties, and ``infrastructure_error`` where it
had one.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from harness.results.records import CaseResult
from harness.results.summary import ROUTES

INFRA_PROPERTY = "infrastructure_error"  # "TransportLost: message"
INFRA_PHASE_PROPERTY = "infrastructure_phase"  # setup, call or teardown
EMULATOR_RESTART_PROPERTY = "emulator_restart"  # why the device's emulator was restarted
RUNTIME_LABEL_PROPERTY = "runtime_label"  # the --runtime it ran (harness.runtime.choice)
_MESSAGE_CHARS = 500


def amend_junit(path: Path, results: Sequence[CaseResult]) -> None:
    """Rewrite ``path`` in place: infrastructure errors as ``<error>``, device properties."""
    tree = ET.parse(path)
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        moved = sum(_mark_infrastructure_errors(case) for case in suite.iter("testcase"))
        if moved:
            suite.set("failures", str(int(suite.get("failures", "0")) - moved))
            suite.set("errors", str(int(suite.get("errors", "0")) + moved))
        _add_device_properties(suite, results)
    tree.write(path, encoding="utf-8", xml_declaration=True)


def _mark_infrastructure_errors(case: ET.Element) -> int:
    """Give the case's infrastructure errors their type; return how many failures became errors."""
    properties = case.findall("properties/property")
    errors = [p.get("value", "") for p in properties if p.get("name") == INFRA_PROPERTY]
    phases = [p.get("value", "") for p in properties if p.get("name") == INFRA_PHASE_PROPERTY]
    moved = 0
    for error, phase in zip(errors, phases, strict=True):  # written in pairs by the plugin
        kind, _, message = error.partition(": ")
        tag = "failure" if phase == "call" else "error"
        node = case.find(tag)
        if node is None:
            continue
        if tag == "failure":
            node.tag = "error"
            moved += 1
        node.set("type", kind)
        node.set("message", message[:_MESSAGE_CHARS])
    return moved


def _add_device_properties(suite: ET.Element, results: Sequence[CaseResult]) -> None:
    facts: dict[str, dict[str, str]] = {}
    served: dict[str, dict[str, None]] = {}
    labels: dict[str, None] = {}
    for result in results:
        if result.device:
            known = facts.setdefault(result.device_runtime, {})
            for key, value in result.facts.items():
                known.setdefault(key, value)
            paths = served.setdefault(result.device_runtime, {})
            paths.update(dict.fromkeys(v.path for v in result.verdicts if v.path))
            if result.runtime_label:
                labels[result.runtime_label] = None
    if not facts:
        return
    properties = suite.find("properties")
    if properties is None:
        properties = ET.Element("properties")
        suite.insert(0, properties)
    ET.SubElement(properties, "property", name="devices", value=",".join(facts))
    if labels:
        ET.SubElement(properties, "property", name="runtimes", value=",".join(labels))
    for device, known in facts.items():
        for key, value in known.items():
            ET.SubElement(properties, "property", name=f"device.{device}.{key}", value=value)
        if served[device]:
            ET.SubElement(
                properties,
                "property",
                name=f"device.{device}.paths_served",
                value=",".join(p for p in ROUTES if p in served[device]),
            )
