"""Option-map cases on one device: probes registered, programs provided, verdicts checked.

:class:`CaseRunner` is what test suites talk to (through the ``et`` fixture). It
owns one agent session, keeps track of which probe backends the device's registry
holds, and turns "send this map" into the right requests and a :class:`Verdict`
(:mod:`harness.runner.case_runner`, which knows nothing of program checks), and checks a
user's program file on top (:mod:`harness.runner.program_check`, which drives the runner it
is given). :func:`open_runner` brings a device up with a runner on it.

With :mod:`harness.options` and :mod:`harness.check` this module is the interface
suites use (``__all__``; ``tests/unit/test_public_api.py`` keeps ``suites/`` to it):
:class:`ModelLoad` for :meth:`CaseRunner.load_models`, :func:`encode_request` for the
bytes :meth:`CaseRunner.send_raw` corrupts, :func:`xnnpack_program`, the harness's
XNNPACK program as a ``.pte`` file (for :meth:`CaseRunner.check_program`), and
:func:`xnnpack_output`, what it computes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from harness.codec.mapfile import MapFile
from harness.codec.wire import encode_request
from harness.data.options import OptionsMap
from harness.programs.xnnpack import expected_output as xnnpack_output
from harness.programs.xnnpack import xnnpack_program
from harness.runner import case_runner
from harness.runner.program_check import ProgramCheck, check_program
from harness.session.agent_requests import RunnerError
from harness.session.agent_session import Session, SessionBroken, TimeLimit
from harness.session.load_request import STORED_DECOY, ModelLoad

if TYPE_CHECKING:
    from harness.devices.base import Device
    from harness.profiles.device_profile import DeviceProfile

__all__ = [
    "STORED_DECOY",
    "CaseRunner",
    "ModelLoad",
    "RunnerError",
    "SessionBroken",
    "encode_request",
    "open_runner",
    "xnnpack_output",
    "xnnpack_program",
]


class CaseRunner(case_runner.CaseRunner):
    """Runs cases on one device (:class:`harness.runner.case_runner.CaseRunner`), and checks
    a user's own program files on it (:meth:`check_program`)."""

    def check_program(
        self,
        program: str | os.PathLike[str],
        options: OptionsMap | MapFile | str | os.PathLike[str] | None = None,
        *,
        probes: Sequence[str] = (),
        strict: bool | None = None,
        reference: Mapping[str, Sequence[float]] | None = None,
    ) -> ProgramCheck:
        """Check a program file (a user's own ``.pte``) on this device: every method it
        holds, loaded through every load path the agent announces with ``options`` (a
        map or a map file), each delegate's ``init`` checked exactly. Delegates named
        in ``probes`` are the harness's probes; every other must be a backend the
        device has. The map is judged once, as :meth:`heed` judges it (the probes' options
        unjudged); ``strict`` overrides :attr:`strict_options` (pytest's
        ``--strict-options``). An option that changes an output element is a failure;
        ``reference`` gives per method the elements its first output must have. What each
        option did goes to :attr:`on_options` (the test's records). See
        :mod:`harness.runner.program_check`."""
        if self._push_program is None:
            raise RunnerError("this runner has no way to push a program file to its device")
        sent = OptionsMap() if options is None else options
        checked = check_program(
            self,
            self._push_program,
            program,
            sent,
            probes=probes,
            strict=strict,
            forget=self._forget_program,
            reference=reference,
        )
        if self.on_options is not None and checked.options:
            self.on_options(checked.options)
        return checked


def open_runner(
    profile: DeviceProfile,
    *,
    board_reset: Callable[[], None] | None = None,
    time_limit: TimeLimit | None = None,
    on_session: Callable[[Session], None] | None = None,
) -> tuple[Device, CaseRunner]:
    """``profile``'s device, brought up, and a :class:`CaseRunner` on its agent (started
    on first use, within ``time_limit``); close the runner, then the device.

    ``board_reset`` resets the board through a lab; ``on_session`` is given every session the
    runner starts (the farm keeps them, to show an agent's stderr with a failed test).
    """
    from harness.devices.bring_up import open_device  # the kind's modules, on demand

    device = open_device(profile, board_reset=board_reset)

    def start_session() -> Session:
        session = device.start_session(time_limit=time_limit)
        if on_session is not None:
            on_session(session)
        return session

    return device, CaseRunner(
        start_session,
        device.program_for,
        time_limit=time_limit,
        push_program=device.push_program,
        forget_program=device.forget_program,
        device_files=device if device.has_files else None,
    )
