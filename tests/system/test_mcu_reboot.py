"""A board with no reset line gets a fresh registry anyway (issue #24, fault 4).

The board is the emulated one, reached as a profile with ``url:`` and no ``reset:``
reaches a board behind a plain socket: the harness cannot restart QEMU or pulse a
line, so only the firmware's soft reset (REBOOT, docs/serial-protocol.md) can give a
new agent session an empty registry.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.data.messages import ENTRY_FLAG_PROBE, Action, Outcome, Report, ReportEntry, Request
from harness.data.options import Option
from harness.devices.base import Device
from harness.emulators.mcu import BOOT_TIMEOUT_S, McuEmulator
from harness.profiles.device_profile import parse_profile
from harness.results.infra import infrastructure_error
from harness.runner import CaseRunner, open_runner
from harness.runner.case_runner import RegistryKept
from harness.session.agent_session import AgentSession


@pytest.fixture
def socket_board(mcu: McuEmulator) -> Iterator[tuple[Device, CaseRunner]]:
    """The running board as a ``url:`` profile without ``reset:`` opens it."""
    mcu.connect().close()  # lets the CPU run and reads its boot HELLO, as a powered board
    profile = parse_profile(
        {
            "name": "socket-board",
            "transport": {"kind": "serial", "url": mcu.url, "boot_timeout": BOOT_TIMEOUT_S},
        },
        None,
    )
    device, runner = open_runner(profile)
    try:
        yield device, runner
    finally:
        runner.close()
        device.close()


def test_each_agent_session_on_a_board_without_a_reset_line_starts_with_an_empty_registry(
    socket_board: tuple[Device, CaseRunner],
) -> None:
    _, runner = socket_board
    first = [f"Probe{i}" for i in range(runner.capacity - len(runner.registered))]
    runner.prepare(first)
    assert len(runner.registered) == runner.capacity  # full
    for session in range(3):
        runner.restart()  # as the farm does between tests that need other probes
        runner.prepare([f"Fresh{session}"])
        assert runner.registered == (f"Fresh{session}",)


def test_reboot_is_answered_then_the_board_boots_again_with_an_empty_registry(
    mcu: McuEmulator,
) -> None:
    with mcu.connect() as link:
        session = AgentSession(link, name="mcu")
        registered = session.request(Request.register(("ProbeA", "ProbeB")))
        assert [e.status for e in registered.entries] == [0, 0]
        hello = session.request(Request(Action.HELLO))
        assert "reboot" in str(hello.fact("capabilities")).split(",")
        assert session.request(Request(Action.REBOOT)).outcome is Outcome.OK
        link.await_reboot()
        assert link.boot_hello is not None and link.boot_hello.session == 0
        after = session.request(Request(Action.HELLO))
        assert after.entries == ()  # the registry is empty again
        assert after.fact("requests_handled") == 1  # counters start again: it booted
        assert mcu.poll() is None  # QEMU rebooted the board, it did not exit


class _BoardNothingResets:
    """The agent link of a board whose firmware serves no REBOOT and that no line resets:
    every agent session's HELLO lists the probes an earlier session registered."""

    def __init__(self, capacity: int) -> None:
        self.kept = tuple(f"Probe{i}" for i in range(capacity))
        self.capacity = capacity

    def request(self, request: Request) -> Report:
        assert request.action is Action.HELLO, request
        return Report(
            Action.HELLO,
            Outcome.OK,
            facts=(Option("registry_capacity", self.capacity),),
            entries=tuple(ReportEntry(n, 0, flags=ENTRY_FLAG_PROBE) for n in self.kept),
        )

    def close(self) -> None:
        pass


def test_a_full_registry_nothing_can_reset_is_an_infrastructure_error_naming_what_to_set():
    board = _BoardNothingResets(capacity=16)
    runner = CaseRunner(lambda: board, lambda delegates: "")  # type: ignore[arg-type, return-value]
    with pytest.raises(RegistryKept) as kept:
        runner.prepare(["Fresh"])
    assert infrastructure_error(kept.value) is kept.value  # device trouble, not the case's
    assert str(kept.value) == (
        "the device kept its registry across an agent restart (16 probe backends of an "
        "earlier session: Probe0, Probe1, Probe2, Probe3, ...), so 1 more do not fit in its "
        "16: nothing resets the board; set transport.reset (dtr or rts, the line wired to its "
        "reset), labgrid reset: power, or flash firmware that serves REBOOT (HELLO "
        "capabilities)"
    )
