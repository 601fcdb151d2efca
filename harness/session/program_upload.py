"""Uploading the programs a LOAD runs to firmware that holds them in RAM.

MCU firmware built from an ExecuTorch source tree runs ``Program::load`` over
programs it received with PROGRAM_DATA and PROGRAM_END (actions 9 and 10,
:mod:`harness.codec.wire.program_messages`) and holds several, each named by its
CRC-32 as 8 lowercase hex digits. :class:`ProgramUploadingSession` is the agent
session of such a board: before a LOAD it uploads, for every model whose
``program`` is empty, the probe program for its delegates
(:func:`harness.programs.probe_program.probe_program`) unless the board holds it
already (the ``programs_held`` fact of the last upload says what it holds), and
sends the LOAD with each such model's ``program`` set to that name.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence

from harness.channel.message_channel import MessageChannel
from harness.codec.wire.program_messages import chunk_limit, encode_program_data, encode_program_end
from harness.data.messages import Action, Outcome, Report, Request
from harness.programs.probe_program import probe_program
from harness.session.agent_session import AgentSession
from harness.transport.base import TransportError


class ProgramUploadError(TransportError):
    """The board refused a program upload: device trouble, not a verdict."""


class ProgramUploadingSession(AgentSession):
    """An agent session whose LOADs first upload the program they run (see the module)."""

    def __init__(self, channel: MessageChannel, max_message: int, *, name: str = "agent") -> None:
        super().__init__(channel, name=name)
        self._chunk = chunk_limit(max_message)
        self._held: frozenset[str] = frozenset()  # names of the programs the board holds
        self.upload_messages = 0  # PROGRAM_DATA and PROGRAM_END requests sent
        if self._chunk <= 0:
            raise ProgramUploadError(f"a max_message of {max_message} leaves no room for a chunk")

    def request(self, request: Request) -> Report:
        if request.action is Action.LOAD:
            request = self.with_programs(request)
        return super().request(request)

    def pipeline(self, requests: Sequence[Request], window: int = 8) -> list[Report]:
        if any(r.action is Action.LOAD for r in requests):  # uploads go between them
            return [self.request(r) for r in requests]
        return super().pipeline(requests, window)

    def with_programs(self, request: Request) -> Request:
        """``request`` with each unnamed model's program uploaded (if not held) and named.

        An upload replaces the board's least recently used program, which may be one this
        LOAD names and the board held already: such a program is uploaded again, at most
        once per model, before the LOAD goes out."""
        specs = [(request.program, request.delegates)]
        specs += [(m.program, m.delegates) for m in request.models]
        ours = {delegates: self.upload(delegates) for program, delegates in specs if not program}
        lost = [delegates for delegates, name in ours.items() if name not in self._held]
        for _ in ours:
            if not lost:
                break
            for delegates in lost:
                self.upload(delegates)
            lost = [delegates for delegates, name in ours.items() if name not in self._held]
        if lost:
            raise ProgramUploadError(
                f"the board cannot hold the {len(ours)} programs this LOAD names at once: it "
                "drops one whenever it receives another (program slots: arenas in HELLO)"
            )
        named = [program or ours[delegates] for program, delegates in specs]
        models = tuple(
            dataclasses.replace(m, program=n)
            for m, n in zip(request.models, named[1:], strict=True)
        )
        return dataclasses.replace(request, program=named[0], models=models)

    def upload(self, delegates: tuple[str, ...]) -> str:
        """Make the board hold the probe program calling ``delegates``; its name."""
        program = probe_program(delegates, min_count=0).read_bytes()
        name = f"{zlib.crc32(program):08x}"
        if name in self._held:
            return name
        for offset in range(0, len(program), self._chunk):
            chunk = program[offset : offset + self._chunk]
            self._expect_ok(encode_program_data(self.next_seq(), offset, chunk), delegates)
        held = self._expect_ok(encode_program_end(self.next_seq(), program), delegates)
        listed = held.fact("programs_held")
        self._held = frozenset(listed.split(",") if isinstance(listed, str) and listed else [name])
        return name

    def _expect_ok(self, message: bytes, delegates: tuple[str, ...]) -> Report:
        self.upload_messages += 1
        report = self.send_raw(message)
        if report.outcome is not Outcome.OK:
            raise ProgramUploadError(
                f"the board refused the upload of the probe program for {delegates!r}: "
                f"{report.outcome.name} detail {report.detail}: {report.message}"
            )
        return report
