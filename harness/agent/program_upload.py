"""Uploading the program a LOAD runs to firmware that holds one in RAM.

MCU firmware built from an ExecuTorch source tree runs ``Program::load`` over a
program it received with PROGRAM_DATA and PROGRAM_END (actions 9 and 10,
:mod:`harness.codec.wire.program_upload`). :class:`ProgramUploadingSession` is the
agent session of such a board: before a LOAD it uploads the probe program for the
LOAD's delegates (:func:`harness.agent.probe_program.probe_program`) unless the board
holds that one already. The LOAD itself goes out unchanged (its ``program`` empty).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.agent.probe_program import probe_program
from harness.agent.session import AgentSession
from harness.codec.wire.program_upload import chunk_limit, encode_program_data, encode_program_end
from harness.link.channel import MessageChannel
from harness.model.messages import Action, Outcome, Report, Request
from harness.transport.base import TransportError


class ProgramUploadError(TransportError):
    """The board refused a program upload: device trouble, not a verdict."""


class ProgramUploadingSession(AgentSession):
    """An agent session whose LOADs first upload the program they run (see the module)."""

    def __init__(self, channel: MessageChannel, max_message: int, *, name: str = "agent") -> None:
        super().__init__(channel, name=name)
        self._chunk = chunk_limit(max_message)
        self._held: tuple[str, ...] | None = None
        self.upload_messages = 0  # PROGRAM_DATA and PROGRAM_END requests sent
        if self._chunk <= 0:
            raise ProgramUploadError(f"a max_message of {max_message} leaves no room for a chunk")

    def request(self, request: Request) -> Report:
        if request.action is Action.LOAD:
            self.upload(request.delegates)
        return super().request(request)

    def pipeline(self, requests: Sequence[Request], window: int = 8) -> list[Report]:
        if any(r.action is Action.LOAD for r in requests):  # uploads go between them
            return [self.request(r) for r in requests]
        return super().pipeline(requests, window)

    def upload(self, delegates: tuple[str, ...]) -> None:
        """Make the board hold the probe program calling ``delegates``."""
        if delegates == self._held:
            return
        self._held = None
        program = probe_program(delegates, min_count=0).read_bytes()
        for offset in range(0, len(program), self._chunk):
            chunk = program[offset : offset + self._chunk]
            self._expect_ok(encode_program_data(self.next_seq(), offset, chunk), delegates)
        self._expect_ok(encode_program_end(self.next_seq(), program), delegates)
        self._held = delegates

    def _expect_ok(self, message: bytes, delegates: tuple[str, ...]) -> None:
        self.upload_messages += 1
        report = self.send_raw(message)
        if report.outcome is not Outcome.OK:
            raise ProgramUploadError(
                f"the board refused the upload of the probe program for {delegates!r}: "
                f"{report.outcome.name} detail {report.detail}: {report.message}"
            )
