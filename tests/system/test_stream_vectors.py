"""The golden stream vectors (tests/vectors/stream) against every stream reader.

Each vector is a byte stream and the reports a device owes it (docs/wire-format.md,
"Stream reading"). Checked: the committed files against their generator; the harness's
reader (:mod:`harness.codec.wire.stream_reader`, fed whole, byte by byte and as a host feeds it);
the hosted agent (x86_64, and aarch64 under qemu-user); the MCU firmware under QEMU,
which gets each unit as one link message (what its serial framing delivers).
"""

from __future__ import annotations

import random
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from golden_vectors import STREAMS, load_generator, load_vector, vector_names
from prerequisites import require

from harness.channel.stream_channel import StreamChannel
from harness.codec import wire
from harness.codec.wire.stream_reader import StreamMessage, StreamReader, StreamUnit
from harness.data.messages import Action, Outcome, Report, Request
from harness.emulators.mcu import McuEmulator
from harness.runtime.agent_build import AgentBuild, ensure_agent
from harness.session.agent_session import AgentProtocolError, AgentSession
from harness.transport.process_stream import ProcessStream, start_stream_process

TIMEOUT_S = 20.0

# (seq, action, outcome, detail): what a test compares of each report.
Answer = tuple[int, str, str, str]


def expected(vector: dict[str, Any], *, framed: bool = False) -> list[Answer]:
    answers = []
    for answer in vector["answers"]:
        if framed:
            answer = answer.get("framed", answer)
        if "error" in answer:
            answers.append((answer["seq"], "none", "rejected", answer["error"]))
        else:
            answers.append((answer["seq"], answer["action"], "ok", "0"))
    return answers


def answer_of(report: Report) -> Answer:
    rejected = report.outcome is Outcome.REJECTED
    detail = wire.WireErrorCode(report.detail).name if rejected else str(report.detail)
    return report.seq, report.action.name.lower(), report.outcome.name.lower(), detail


def split_reports(data: bytes) -> list[Report]:
    reports = []
    while data:
        length = wire.peek_header(data, expect=wire.MessageType.REPORT).length
        reports.append(wire.decode_report(data[:length]))
        data = data[length:]
    return reports


def header(
    *, version: int = wire.WIRE_VERSION, msg_type: int = 1, flags: int = 0, length: int, seq: int
) -> bytes:
    return b"ETBO" + struct.pack("<BBHII", version, msg_type, flags, length, seq)


# --------------------------------------------------------------------------- the files


def test_committed_stream_vectors_are_what_generate_py_writes() -> None:
    written = load_generator().expected_stream_files()
    committed = {p.name: p.read_bytes() for p in STREAMS.iterdir()}
    assert sorted(committed) == sorted(written), "run: python tests/vectors/generate.py"
    stale = [name for name in written if committed[name] != written[name]]
    assert not stale, f"stale stream vectors {stale}; run: python tests/vectors/generate.py"


def test_stream_vectors_cover_every_rule() -> None:
    loaded = [load_vector(name, STREAMS) for name in vector_names(STREAMS)]
    vectors = [vector for _, vector in loaded]
    answers = [a for v in vectors for a in v["answers"]]
    errors = {a.get("error") for a in answers}
    skipped = {"VERSION", "MSG_TYPE", "FLAGS"}  # header refused, length usable
    resynchronised = {"BAD_MAGIC", "LENGTH"}
    body = {"CRC", "ACTION"}
    assert skipped | resynchronised | body | {"TRUNCATED"} <= errors
    assert any(not v["answers"] for v in vectors), "no empty stream"
    assert any("framed" in a for a in answers), "no unit a framed device answers otherwise"
    for stream, vector in loaded:  # the units tile the stream
        ends = [0] + [a["span"][1] for a in vector["answers"]]
        assert [a["span"][0] for a in vector["answers"]] == ends[:-1]
        assert ends[-1] == len(stream)


# ---------------------------------------------------------- harness.codec.wire.stream_reader


def python_answer(unit: StreamUnit) -> tuple[Answer, int]:
    """The report a device owes ``unit``, and the unit's offset."""
    if not isinstance(unit, StreamMessage):
        return (unit.seq, "none", "rejected", unit.error.code.name), unit.offset
    try:
        request = wire.decode_request(unit.data)
    except wire.WireError as exc:
        seq = struct.unpack_from("<I", unit.data, 12)[0]
        return (seq, "none", "rejected", exc.code.name), unit.offset
    return (request.seq, request.action.name.lower(), "ok", "0"), unit.offset


def fed_in_chunks(stream: bytes, size: int) -> list[StreamUnit]:
    reader = StreamReader(wire.MessageType.REQUEST)
    units = []
    for start in range(0, len(stream), size):
        units += reader.feed(stream[start : start + size])
    return units + reader.end()


def fed_as_a_host_feeds(stream: bytes) -> list[StreamUnit]:
    """At most :meth:`StreamReader.wanted` bytes at a time, as AgentSession reads."""
    reader = StreamReader(wire.MessageType.REQUEST)
    units: list[StreamUnit] = []
    position = 0
    while position < len(stream):
        size = reader.wanted()
        assert size >= 1
        units += reader.feed(stream[position : position + size])
        position += size
    return units + reader.end()


@pytest.mark.parametrize("name", vector_names(STREAMS))
def test_python_reader(name: str) -> None:
    stream, vector = load_vector(name, STREAMS)
    want = expected(vector)
    starts = [a["span"][0] for a in vector["answers"]]
    for units in (
        fed_in_chunks(stream, len(stream) or 1),
        fed_in_chunks(stream, 1),
        fed_in_chunks(stream, 7),
        fed_as_a_host_feeds(stream),
    ):
        assert [python_answer(u) for u in units] == list(zip(want, starts, strict=True))


@pytest.mark.parametrize("name", vector_names(STREAMS))
def test_python_reader_answers_as_soon_as_the_deciding_bytes_are_in(name: str) -> None:
    """A whole message at its last byte, a refused header at its 16th, the rest at the end."""
    stream, vector = load_vector(name, STREAMS)
    reader = StreamReader(wire.MessageType.REQUEST)
    seen_at: list[tuple[int | None, StreamUnit]] = []
    for position in range(len(stream)):
        seen_at += [(position + 1, unit) for unit in reader.feed(stream[position : position + 1])]
    seen_at += [(None, unit) for unit in reader.end()]
    assert len(seen_at) == len(vector["answers"])
    for (when, unit), answer in zip(seen_at, vector["answers"], strict=True):
        start, end = answer["span"]
        if isinstance(unit, StreamMessage):
            assert when == end, answer
        elif answer["error"] == "TRUNCATED":  # only the end of the input decides that
            assert when is None, answer
        else:
            assert when == start + wire.HEADER_SIZE, answer


def test_python_reader_refuses_a_bad_limit() -> None:
    with pytest.raises(ValueError, match=r"max_message must be 21\.\.1048576"):
        StreamReader(wire.MessageType.REQUEST, 20)


def test_python_reader_skips_a_message_above_its_own_limit_whole() -> None:
    """LENGTH from the reader's own limit, but the length is usable: no resynchronising."""
    inner = wire.encode_request(Request(Action.HELLO, seq=2))
    small = StreamReader(wire.MessageType.REQUEST, max_message=len(inner) - 1)
    units = small.feed(inner + inner) + small.end()
    assert [(u.offset, u.seq, u.error.code) for u in units if not isinstance(u, StreamMessage)] == [
        (0, 2, wire.WireErrorCode.LENGTH),
        (len(inner), 2, wire.WireErrorCode.LENGTH),
    ]


# --------------------------------------------------------------------------- the hosted agent


@pytest.fixture(scope="module")
def build() -> AgentBuild:
    return ensure_agent("x86_64")


def agent_answers(argv: list[str], stream: bytes) -> list[Answer]:
    """The agent's reports for ``stream`` on stdin, read to the end of its stdout."""
    result = subprocess.run(argv, input=stream, capture_output=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    return [answer_of(r) for r in split_reports(result.stdout)]


@pytest.mark.parametrize("name", vector_names(STREAMS))
def test_hosted_agent(build: AgentBuild, name: str) -> None:
    stream, vector = load_vector(name, STREAMS)
    assert agent_answers([str(build.binary)], stream) == expected(vector)


def random_stream(rng: random.Random) -> bytes:
    """Pieces that exercise every rule, cut and joined at random."""
    hello = wire.encode_request(Request(Action.HELLO, seq=rng.randrange(1 << 32)))
    pieces = [
        hello,
        hello[: rng.randrange(1, len(hello))],
        b"ETBO"[: rng.randrange(1, 5)],
        bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))),
        header(
            version=rng.choice((1, 2)),
            msg_type=rng.randrange(4),
            flags=rng.choice((0, 1)),
            length=rng.choice((0, 20, 21, 25, 60, wire.MAX_MESSAGE + 1)),
            seq=rng.randrange(9),
        ),
    ]
    return b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 25)))


def test_hosted_agent_agrees_with_the_python_reader_on_random_streams(build: AgentBuild) -> None:
    rng = random.Random(11)
    for _ in range(100):
        stream = random_stream(rng)
        reader = StreamReader(wire.MessageType.REQUEST)
        python = [python_answer(u)[0] for u in reader.feed(stream) + reader.end()]
        assert agent_answers([str(build.binary)], stream) == python, stream.hex()


@pytest.fixture
def session(build: AgentBuild) -> Iterator[AgentSession]:
    process = start_stream_process([str(build.binary)], name="et-agent")
    agent = AgentSession(StreamChannel(ProcessStream(process, "et-agent"), timeout=TIMEOUT_S))
    yield agent
    agent.close()
    assert process.popen.returncode == 0


def test_hosted_agent_answers_a_refused_header_before_reading_on(session: AgentSession) -> None:
    """Each report comes without a byte more than its unit's first 16 (or whole message)."""
    assert isinstance(session.channel, StreamChannel)  # the fixture's
    refused = session.send_raw(header(version=1, length=100, seq=5), seq=5)
    assert (refused.outcome, refused.detail) == (Outcome.REJECTED, wire.WireErrorCode.VERSION)
    hello = wire.encode_request(Request(Action.HELLO, seq=6))
    # The other 84 bytes of that unit are discarded unexamined, a HELLO among them.
    session.channel.stream.write(hello + bytes(84 - len(hello)))
    garbage = b"\xaa" * 16
    assert session.send_raw(garbage, seq=0xAAAAAAAA).detail == wire.WireErrorCode.BAD_MAGIC
    assert session.send_raw(hello, seq=6).outcome is Outcome.OK
    report_typed = header(msg_type=2, flags=1, length=21, seq=7)
    assert session.send_raw(report_typed, seq=7).detail == wire.WireErrorCode.MSG_TYPE
    session.channel.stream.write(bytes(5))
    assert session.request(Request(Action.HELLO)).outcome is Outcome.OK


class CannedStream:
    """A byte stream that answers with ``data``, whatever is written."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def write(self, data: bytes) -> None:
        pass

    def read_exact(self, size: int, timeout: float) -> bytes:
        chunk, self.data = self.data[:size], self.data[size:]
        assert len(chunk) == size, "the session read past the unit"
        return chunk

    def stderr_tail(self) -> str:
        return "(canned)"


def test_host_session_takes_a_refused_unit_as_a_broken_link() -> None:
    """A device must send whole reports: the host reader does not resynchronise."""
    a_request = wire.encode_request(Request(Action.HELLO, seq=3))
    session = AgentSession(StreamChannel(CannedStream(a_request), timeout=1.0))  # type: ignore[arg-type]
    with pytest.raises(AgentProtocolError, match="MSG_TYPE"):
        session.send_raw(b"", seq=3)


def _in_version(message: bytes, version: int) -> bytes:
    return wire.seal(message[:4] + bytes([version]) + message[5:-4])


@pytest.mark.parametrize(
    ("answer", "found", "advice"),
    [
        # What a version-1 agent answers a version-2 request: a version-1 REJECTED report.
        (
            _in_version(wire.encode_report(Report(Action.NONE, Outcome.REJECTED, 3, seq=3)), 1),
            1,
            r"rebuild the agent from this checkout.*agent\.prebuilt.*cmake --build",
        ),
        (load_vector("bad_version_1_report_entry_without_model")[0], 1, "rebuild"),
        (_in_version(wire.encode_report(Report(Action.HELLO, Outcome.OK, seq=3)), 3), 3, "update"),
    ],
)
def test_an_agent_of_another_wire_version_is_refused_saying_which_side_to_update(
    answer: bytes, found: int, advice: str
) -> None:
    """Its report is never read by this version's rules: the error names both versions."""
    session = AgentSession(StreamChannel(CannedStream(answer), timeout=1.0))  # type: ignore[arg-type]
    versions = f"agent speaks wire-format version {found}, this harness version {wire.WIRE_VERSION}"
    with pytest.raises(AgentProtocolError, match=f"{versions}: {advice}"):
        session.request(Request(Action.HELLO))


@pytest.mark.slow
def test_arm64_agent_under_qemu(tmp_path: Path) -> None:
    require("aarch64-linux-gnu-g++", "qemu-aarch64")
    arm = ensure_agent("aarch64")
    argv = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(arm.binary)]
    for name in vector_names(STREAMS):
        stream, vector = load_vector(name, STREAMS)
        assert agent_answers(argv, stream) == expected(vector), name


# --------------------------------------------------------------------------- the MCU firmware


@pytest.mark.parametrize("name", vector_names(STREAMS))
def test_mcu_firmware_answers_each_unit_as_one_link_message(mcu: McuEmulator, name: str) -> None:
    stream, vector = load_vector(name, STREAMS)
    answers = []
    with mcu.connect() as link:
        session = AgentSession(link)
        for answer, want in zip(vector["answers"], expected(vector, framed=True), strict=True):
            start, end = answer["span"]
            answers.append(answer_of(session.send_raw(stream[start:end], seq=want[0])))
        assert mcu.shutdown(link, 0) == 0
    assert answers == expected(vector, framed=True)


def test_mcu_firmware_checks_the_length_field_against_its_own_max_message(mcu: McuEmulator) -> None:
    """Step 3 with the device's limit: LENGTH, not TRUNCATED, for a header claiming more."""
    with mcu.connect() as link:
        claimed = link.hello.max_message + 1
        report = AgentSession(link).send_raw(header(length=claimed, seq=9) + bytes(14), seq=9)
        assert (report.outcome, report.detail) == (Outcome.REJECTED, wire.WireErrorCode.LENGTH)
        assert mcu.shutdown(link, 0) == 0
