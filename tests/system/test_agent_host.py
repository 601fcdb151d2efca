"""The device agent, built against the real ExecuTorch 1.5.1 runtime, run on this host.

Each test starts its own agent process (the runtime cannot unregister backends,
so registrations never leak between tests) and talks wire format v2 to it over
pipes, in session mode, or through files in one-shot mode.
"""

from __future__ import annotations

import dataclasses
import os
import random
import selectors
import shutil
import signal
import struct
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from golden_vectors import load_vector
from prerequisites import require

from harness.codec import wire
from harness.data.messages import (
    ENTRY_FLAG_PROBE,
    Action,
    LoadPath,
    LoadSpec,
    Outcome,
    Report,
    ReportEntry,
    Request,
)
from harness.data.options import Option, OptionsMap, OptionValue
from harness.data.runtime_error import RuntimeErrorCode as E
from harness.programs.probe_program import probe_program
from harness.runtime.agent_build import AgentBuild, ensure_agent

TIMEOUT_S = 20.0
# The x86_64 wheel's real backends, in the order their libraries' static
# initializers register them.
REAL_BACKENDS = ("QnnBackend", "OpenvinoBackend", "XnnpackBackend")


class AgentDied(Exception):
    """The agent closed its stdout or did not answer in time."""


class AgentProcess:
    """An et-agent in session mode: requests to its stdin, reports from its stdout."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)
        self._seq = 0

    def request(self, request: Request) -> Report:
        self._seq += 1
        report = self.send_raw(wire.encode_request(dataclasses.replace(request, seq=self._seq)))
        assert report.seq == self._seq, f"report answers seq {report.seq}, expected {self._seq}"
        return report

    def send_raw(self, data: bytes) -> Report:
        self.write(data)
        return self.read_report()

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read_report(self) -> Report:
        head = self._read_exact(wire.HEADER_SIZE)
        header = wire.peek_header(head, expect=wire.MessageType.REPORT)
        return wire.decode_report(head + self._read_exact(header.length - wire.HEADER_SIZE))

    def _read_exact(self, size: int) -> bytes:
        data = b""
        deadline = time.monotonic() + TIMEOUT_S
        while len(data) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                raise AgentDied(f"no report within {TIMEOUT_S} s; stderr: {self.stderr()}")
            assert self.proc.stdout is not None
            chunk = os.read(self.proc.stdout.fileno(), size - len(data))
            if not chunk:
                raise AgentDied(f"agent closed stdout (exit {self.proc.poll()}): {self.stderr()}")
            data += chunk
        return data

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def finish(self) -> tuple[int, str]:
        """Close stdin (EOF) and return the exit code and stderr."""
        try:
            _, err = self.proc.communicate(timeout=TIMEOUT_S)  # closes stdin first
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AgentDied("agent did not exit after EOF on stdin") from None
        finally:
            self._selector.close()
        return self.proc.returncode, err.decode(errors="replace")


@pytest.fixture(scope="module")
def build() -> AgentBuild:
    return ensure_agent("x86_64")


@pytest.fixture
def agent(build: AgentBuild) -> Iterator[AgentProcess]:
    process = AgentProcess([str(build.binary)])
    yield process
    if process.proc.poll() is None:
        code, err = process.finish()
        assert code == 0, f"agent exited {code} at EOF: {err}"


def opts(**values: OptionValue) -> tuple[Option, ...]:
    return tuple(Option(k, v) for k, v in values.items())


def entry(report: Report, name: str) -> ReportEntry:
    found = report.entry(name)
    assert found is not None, f"no entry {name!r} in {report}"
    return found


def register(agent: AgentProcess, *names: str) -> Report:
    report = agent.request(Request.register(names))
    assert report.outcome is Outcome.OK
    assert [(e.name, e.status, e.flags) for e in report.entries] == [
        (n, E.Ok, ENTRY_FLAG_PROBE) for n in names
    ]
    return report


def load(agent: AgentProcess, delegates: tuple[str, ...], options: OptionsMap) -> Report:
    return agent.request(Request.load(str(probe_program(delegates)), delegates, options))


def set_options(agent: AgentProcess, data: Mapping[str, Mapping[str, OptionValue]]) -> Report:
    return agent.request(Request(Action.SET, OptionsMap.from_dict(data)))


def get_options(agent: AgentProcess, data: Mapping[str, Mapping[str, OptionValue]]) -> Report:
    return agent.request(Request(Action.GET, OptionsMap.from_dict(data)))


# --------------------------------------------------------------------------- HELLO, REGISTER


def test_hello_describes_the_device_and_the_real_registry(agent: AgentProcess) -> None:
    report = agent.request(Request(Action.HELLO))
    assert report.outcome is Outcome.OK
    assert report.fact("runtime") == "executorch 1.5.1"
    assert report.fact("wire_version") == wire.WIRE_VERSION
    assert report.fact("abi") == "x86_64"
    assert report.fact("max_message") == wire.MAX_MESSAGE
    assert report.fact("registry_capacity") == 16
    assert report.fact("capabilities") == "load,execute,set,get,reset,register,hello"
    assert report.fact("directives") == "etb.dup:,etb.id_suffix"
    assert isinstance(report.fact("agent_version"), str)
    # Linking the wheel's backend libraries registered its real backends.
    assert [(e.name, e.status, e.flags) for e in report.entries] == [
        (name, 0, 0) for name in REAL_BACKENDS
    ]


def test_register_reports_register_backends_real_status(agent: AgentProcess) -> None:
    register(agent, "ProbeA", "ProbeB")
    again = agent.request(Request.register(("ProbeA", "XnnpackBackend", "ProbeC")))
    assert [(e.name, e.status, e.flags) for e in again.entries] == [
        ("ProbeA", E.InvalidArgument, 0),  # duplicate name
        ("XnnpackBackend", E.InvalidArgument, 0),
        ("ProbeC", E.Ok, ENTRY_FLAG_PROBE),
    ]
    hello = agent.request(Request(Action.HELLO))
    assert [(e.name, e.flags) for e in hello.entries] == [
        *((name, 0) for name in REAL_BACKENDS),
        ("ProbeA", ENTRY_FLAG_PROBE),
        ("ProbeB", ENTRY_FLAG_PROBE),
        ("ProbeC", ENTRY_FLAG_PROBE),
    ]


def test_full_registry_gives_internal(agent: AgentProcess) -> None:
    # The real backends hold 3 of the 16 slots.
    register(agent, *(f"P{i}" for i in range(8)))
    names = tuple(f"P{i}" for i in range(8, 14))
    report = agent.request(Request.register(names))
    assert [(e.name, e.status) for e in report.entries] == [
        *((n, E.Ok) for n in names[:5]),
        ("P13", E.Internal),
    ]
    hello = agent.request(Request(Action.HELLO))
    assert len(hello.entries) == 16


# --------------------------------------------------------------------------- LOAD, EXECUTE


def test_load_hands_each_probe_exactly_its_own_options(agent: AgentProcess) -> None:
    register(agent, "ProbeA", "ProbeB", "ProbeC", "ProbeD")
    options = OptionsMap.from_dict(
        {
            "ProbeB": {"mode": "fast ⚡", "level": -7},
            "ProbeA": {"threads": 4, "fp16": True, "cache": "/data/local/tmp/a"},
            "ProbeD": {"unused": 1},  # no delegate in the program: never delivered
            "NotRegistered": {"x": False},
        }
    )
    report = load(agent, ("ProbeA", "ProbeB", "ProbeC", "ProbeA"), options)
    assert report.outcome is Outcome.OK, report.message
    assert [e.name for e in report.entries] == ["ProbeA", "ProbeB", "ProbeC"]  # first-init order
    a, b, c = report.entries
    assert a.options == opts(threads=4, fp16=True, cache="/data/local/tmp/a")
    assert (a.calls, a.executes, a.flags, a.status) == (2, 2, ENTRY_FLAG_PROBE, 0)
    assert b.options == opts(mode="fast ⚡", level=-7)
    assert (b.calls, b.executes) == (1, 1)
    assert c.options == ()  # no map entry: an empty runtime_specs span
    assert (c.calls, c.executes) == (1, 1)
    load_us, execute_us = report.fact("load_us"), report.fact("execute_us")
    assert isinstance(load_us, int) and load_us >= 0
    assert isinstance(execute_us, int) and execute_us >= 0

    again = agent.request(Request(Action.EXECUTE))
    assert again.outcome is Outcome.OK
    assert [(e.name, e.calls, e.executes, e.options) for e in again.entries] == [
        ("ProbeA", 0, 2, ()),
        ("ProbeB", 0, 1, ()),
        ("ProbeC", 0, 1, ()),
    ]
    assert again.fact("execute_us") is not None


def test_load_with_eight_backends_and_unicode_names(agent: AgentProcess) -> None:
    names = tuple(f"Проба-{i}-🙂" for i in range(8))
    register(agent, *names)
    options = OptionsMap.from_dict(
        {name: {"index": i, "name": name, "odd": bool(i % 2)} for i, name in enumerate(names)}
    )
    report = load(agent, names, options)
    assert report.outcome is Outcome.OK, report.message
    assert [e.name for e in report.entries] == list(names)
    for i, name in enumerate(names):
        assert entry(report, name).options == opts(index=i, name=name, odd=bool(i % 2))


def test_load_with_limit_sized_keys_and_values(agent: AgentProcess) -> None:
    register(agent, "P")
    many = {f"k{i:02d}-" + "x" * 58: "v" * 255 for i in range(64)}
    report = load(agent, ("P",), OptionsMap.from_dict({"P": many}))
    assert report.outcome is Outcome.OK, report.message
    assert entry(report, "P").options == tuple(Option(k, v) for k, v in many.items())


def test_load_refuses_a_program_whose_delegates_differ(agent: AgentProcess) -> None:
    register(agent, "ProbeA", "ProbeB")
    program = probe_program(("ProbeA", "ProbeB"))
    report = agent.request(Request.load(str(program), ("ProbeB", "ProbeA"), OptionsMap()))
    assert report.outcome is Outcome.RUNTIME_ERROR
    assert report.detail == E.InvalidProgram
    assert '["ProbeA", "ProbeB"]' in report.message and '["ProbeB", "ProbeA"]' in report.message
    assert report.entries == ()


def test_load_failures_carry_the_runtime_error(agent: AgentProcess, tmp_path: Path) -> None:
    missing = agent.request(Request.load(str(tmp_path / "absent.pte"), ("P",), OptionsMap()))
    assert (missing.outcome, missing.detail) == (Outcome.RUNTIME_ERROR, E.AccessFailed)
    assert "absent.pte" in missing.message

    garbage = tmp_path / "garbage.pte"
    garbage.write_bytes(b"\0" * 256)
    refused = agent.request(Request.load(str(garbage), ("P",), OptionsMap()))
    assert refused.outcome is Outcome.RUNTIME_ERROR and refused.detail != 0

    unregistered = load(agent, ("NobodyHere",), OptionsMap())
    assert (unregistered.outcome, unregistered.detail) == (Outcome.RUNTIME_ERROR, E.NotFound)
    assert 'delegate "NobodyHere" has no registered backend' in unregistered.message

    not_loaded = agent.request(Request(Action.EXECUTE))
    assert (not_loaded.outcome, not_loaded.detail) == (Outcome.RUNTIME_ERROR, E.InvalidState)


def test_xnnpack_refuses_a_probe_blob_at_init(agent: AgentProcess) -> None:
    report = load(agent, ("XnnpackBackend",), OptionsMap.from_dict({"XnnpackBackend": {}}))
    assert report.outcome is Outcome.RUNTIME_ERROR
    assert report.detail == E.InvalidArgument  # XNNCompiler: "XNNHeader may be corrupt"
    # A real backend's entry carries what is observable: its init failed.
    assert [(e.name, e.status, e.flags) for e in report.entries] == [
        ("XnnpackBackend", E.InvalidArgument, 0)
    ]


def test_qnn_init_crashes_on_a_foreign_blob_today(agent: AgentProcess) -> None:
    """Observed in 1.5.1 without the QNN SDK: QnnBackend::init dies with SIGSEGV."""
    with pytest.raises(AgentDied, match="agent closed stdout"):
        load(agent, ("QnnBackend",), OptionsMap())
    assert agent.proc.wait(timeout=TIMEOUT_S) == -signal.SIGSEGV


@pytest.mark.xfail(
    strict=True,
    raises=AgentDied,
    reason=(
        "QnnBackend 1.5.1 crashes (SIGSEGV) in init on a processed blob that is not a QNN "
        "context, instead of returning an Error the runtime could report"
    ),
)
def test_qnn_init_refuses_a_foreign_blob_with_an_error(agent: AgentProcess) -> None:
    report = load(agent, ("QnnBackend",), OptionsMap())
    assert report.outcome is Outcome.RUNTIME_ERROR
    assert entry(report, "QnnBackend").status != E.Ok


# --------------------------------------------------------------------------- SET, GET


def test_set_and_get_reach_only_the_named_probe(agent: AgentProcess) -> None:
    register(agent, "ProbeA", "ProbeB")
    report = set_options(agent, {"ProbeA": {"k": 1, "s": "x", "b": True}, "ProbeB": {"k": 2}})
    assert report.outcome is Outcome.OK
    assert [(e.name, e.status, e.calls, e.flags) for e in report.entries] == [
        ("ProbeA", 0, 1, ENTRY_FLAG_PROBE),
        ("ProbeB", 0, 1, ENTRY_FLAG_PROBE),
    ]
    assert entry(report, "ProbeA").options == opts(k=1, s="x", b=True)
    assert entry(report, "ProbeB").options == opts(k=2)

    got = get_options(
        agent,
        {"ProbeA": {"b": False, "k": 0, "unknown": 5, "s": ""}, "ProbeB": {"k": 0, "s": "keep"}},
    )
    assert got.outcome is Outcome.OK
    assert entry(got, "ProbeA").options == opts(b=True, k=1, unknown=5, s="x")
    assert entry(got, "ProbeB").options == opts(k=2, s="keep")  # ProbeA's "s" stayed with ProbeA
    assert (entry(got, "ProbeA").calls, entry(got, "ProbeA").flags) == (1, ENTRY_FLAG_PROBE)


def test_unknown_backend_name_is_not_found(agent: AgentProcess) -> None:
    for report in (
        set_options(agent, {"Nobody": {"k": 1}}),
        get_options(agent, {"Nobody": {"k": 1}}),
    ):
        assert report.outcome is Outcome.OK
        assert [(e.name, e.status, e.flags) for e in report.entries] == [("Nobody", E.NotFound, 0)]
    assert get_options(agent, {"Nobody": {"k": 1}}).entries[0].options == opts(k=1)


@pytest.mark.parametrize(
    ("key", "value", "status"),
    [
        ("workspace_sharing_mode", 0, E.Ok),
        ("workspace_sharing_mode", 2, E.Ok),
        ("workspace_sharing_mode", 3, E.InvalidArgument),
        ("workspace_sharing_mode", -1, E.InvalidArgument),
        ("workspace_sharing_mode", True, E.InvalidArgument),
        ("workspace_sharing_mode", "1", E.InvalidArgument),
        ("weight_cache_enabled", False, E.Ok),
        ("weight_cache_enabled", 1, E.InvalidArgument),
        ("packed_cache_path", "/tmp/packed", E.Ok),
        ("packed_cache_path", 7, E.InvalidArgument),
        ("not_an_xnnpack_key", 1, E.Ok),  # unknown keys are ignored
    ],
)
def test_xnnpack_set_option_statuses(
    agent: AgentProcess, key: str, value: OptionValue, status: int
) -> None:
    report = set_options(agent, {"XnnpackBackend": {key: value}})
    (xnn,) = report.entries
    assert (xnn.name, xnn.status, xnn.flags, xnn.calls) == ("XnnpackBackend", status, 0, 1)
    # The records: what the backend's own set_option was handed, and what it returned.
    assert xnn.is_recorded
    assert (xnn.delivered, xnn.backend_status) == (opts(**{key: value}), status)


def test_xnnpack_get_reads_back_what_set_stored(agent: AgentProcess) -> None:
    placeholders: dict[str, OptionValue] = {
        "workspace_sharing_mode": -5,
        "weight_cache_enabled": True,
        "packed_cache_path": "placeholder",
        "not_an_xnnpack_key": 42,
    }
    stored: dict[str, OptionValue] = {
        "workspace_sharing_mode": 1,
        "weight_cache_enabled": False,
        "packed_cache_path": "/tmp/pc",
    }
    assert set_options(agent, {"XnnpackBackend": stored}).entries[0].status == E.Ok
    refused = set_options(agent, {"XnnpackBackend": {"workspace_sharing_mode": 9}})
    assert refused.entries[0].status == E.InvalidArgument
    got = get_options(agent, {"XnnpackBackend": placeholders})
    (xnn,) = got.entries
    assert (xnn.name, xnn.status, xnn.flags, xnn.calls) == ("XnnpackBackend", E.Ok, 0, 1)
    # The refused 9 changed nothing; the unknown key is left as it was sent (the span
    # as the backend's own get_option left it).
    assert xnn.delivered == opts(**stored, not_an_xnnpack_key=42)
    assert xnn.backend_status == E.Ok


# --------------------------------------------------------------------------- RESET


def test_reset_forgets_program_and_probe_state_but_not_registrations(agent: AgentProcess) -> None:
    register(agent, "ProbeA")
    assert set_options(agent, {"ProbeA": {"k": 1}}).entries[0].status == E.Ok
    assert (
        load(agent, ("ProbeA",), OptionsMap.from_dict({"ProbeA": {"t": 1}})).outcome is Outcome.OK
    )

    reset = agent.request(Request(Action.RESET))
    assert (reset.outcome, reset.entries) == (Outcome.OK, ())

    assert get_options(agent, {"ProbeA": {"k": 0}}).entries[0].options == opts(k=0)
    after = agent.request(Request(Action.EXECUTE))
    assert (after.outcome, after.detail) == (Outcome.RUNTIME_ERROR, E.InvalidState)
    assert "ProbeA" in [e.name for e in agent.request(Request(Action.HELLO)).entries]
    assert agent.request(Request.register(("ProbeA",))).entries[0].status == E.InvalidArgument
    reloaded = load(agent, ("ProbeA",), OptionsMap())
    assert (reloaded.outcome, entry(reloaded, "ProbeA").options) == (Outcome.OK, ())


# ------------------------------------------- LOAD and EXECUTE as docs/wire-format.md decides

PAIR = ("ProbeA", "ProbeB")


def _load(agent: AgentProcess, program: Path, path: LoadPath, **fields: object) -> Outcome:
    request = Request.load(str(program), PAIR, OptionsMap(), path=path, **fields)  # type: ignore[arg-type]
    return agent.request(request).outcome


def test_hello_lists_keep_but_never_concurrent_which_max_models_implies(
    agent: AgentProcess,
) -> None:
    hello = agent.request(Request(Action.HELLO))
    assert (hello.fact("load_flags"), hello.fact("max_models")) == ("keep", 8)


def test_keep_must_name_the_program_loaded_before_on_every_path(
    agent: AgentProcess, tmp_path: Path
) -> None:
    register(agent, *PAIR)
    program = probe_program(PAIR)
    copy = tmp_path / "copy.pte"
    shutil.copyfile(program, copy)  # the same bytes, another program
    for path in LoadPath:
        assert _load(agent, program, path) is Outcome.OK, path
        other = agent.request(
            Request.load(str(copy), PAIR, OptionsMap(), path=path, keep=True, method="second")
        )
        assert (other.outcome, other.detail) == (Outcome.RUNTIME_ERROR, E.InvalidArgument), path
        assert f"KEEP names program {copy}, the loaded" in other.message
        assert other.entries == ()


def test_keep_needs_a_program_loaded_through_the_same_kind_of_path(agent: AgentProcess) -> None:
    register(agent, *PAIR)
    program = probe_program(PAIR)
    assert _load(agent, program, LoadPath.PROGRAM) is Outcome.OK
    onto_program = agent.request(
        Request.load(str(program), PAIR, OptionsMap(), path=LoadPath.MODULE, keep=True)
    )
    assert (onto_program.outcome, onto_program.detail) == (Outcome.RUNTIME_ERROR, E.InvalidState)
    assert _load(agent, program, LoadPath.MODULE) is Outcome.OK
    onto_module = agent.request(
        Request.load(str(program), PAIR, OptionsMap(), path=LoadPath.PROGRAM, keep=True)
    )
    assert (onto_module.outcome, onto_module.detail) == (Outcome.RUNTIME_ERROR, E.InvalidState)
    # Any module path onto any module path: one Module.
    assert _load(agent, program, LoadPath.MODULE_METHOD, keep=True, method="second") is Outcome.OK


def test_keep_with_further_models_is_unsupported_and_loads_nothing(agent: AgentProcess) -> None:
    register(agent, *PAIR)
    program = probe_program(PAIR)
    assert _load(agent, program, LoadPath.PROGRAM) is Outcome.OK
    report = agent.request(
        Request.load(
            str(program), PAIR, OptionsMap(), keep=True, models=(LoadSpec(str(program), PAIR),)
        )
    )
    assert (report.outcome, report.entries) == (Outcome.UNSUPPORTED, ())
    # Nothing was unloaded either: the method loaded before still runs.
    assert agent.request(Request(Action.EXECUTE)).outcome is Outcome.OK


def test_execute_after_a_failed_keep_runs_the_method_loaded_before(agent: AgentProcess) -> None:
    register(agent, *PAIR)
    program = probe_program(PAIR)
    assert _load(agent, program, LoadPath.PROGRAM) is Outcome.OK
    failed = agent.request(
        Request.load(str(program), PAIR[::-1], OptionsMap(), keep=True, method="second")
    )
    assert (failed.outcome, failed.detail) == (Outcome.RUNTIME_ERROR, E.InvalidProgram)
    again = agent.request(Request(Action.EXECUTE))
    assert again.outcome is Outcome.OK, again.message
    assert [(e.name, e.executes, e.model) for e in again.entries] == [
        ("ProbeA", 1, 0),
        ("ProbeB", 1, 0),
    ]


def test_several_models_report_model_0s_path_and_the_first_failing_models_error(
    agent: AgentProcess, tmp_path: Path
) -> None:
    register(agent, *PAIR)
    program = probe_program(PAIR)
    missing = tmp_path / "absent.pte"
    alone = agent.request(Request.load(str(missing), PAIR, OptionsMap(), path=LoadPath.MODULE))
    assert alone.outcome is Outcome.RUNTIME_ERROR and alone.detail != E.NotFound
    unregistered = str(probe_program(("Nobody",)))
    models = (
        LoadSpec(str(missing), PAIR, path=LoadPath.MODULE),
        LoadSpec(unregistered, ("Nobody",)),
    )
    options = OptionsMap.from_dict({"ProbeA": {"k": 1}})
    report = agent.request(Request.load(str(program), PAIR, options, models=models))
    assert (report.outcome, report.detail) == (Outcome.RUNTIME_ERROR, alone.detail)
    assert report.fact("load_path") == "program"  # model 0's, whatever the others'
    assert report.message.startswith("model 1: ")
    assert "model 2: " in report.message and f"(0x{E.NotFound:02x})" in report.message
    assert [(e.name, e.model, e.options) for e in report.entries] == [
        ("ProbeA", 0, options.backends[0].options),
        ("ProbeB", 0, ()),
    ]


def test_entries_past_sixteen_are_dropped_and_the_message_says_so(agent: AgentProcess) -> None:
    names = tuple(f"P{i}" for i in range(8))
    register(agent, *names)
    program = str(probe_program(names))
    models = (LoadSpec(program, names), LoadSpec(program, names))  # 3 x 8 entries
    report = agent.request(Request.load(program, names, OptionsMap(), models=models))
    assert report.outcome is Outcome.OK
    assert [(e.name, e.model) for e in report.entries] == [(n, 0) for n in names] + [
        (n, 1) for n in names
    ]
    assert "report truncated: too many entries" in report.message


def test_execute_runs_every_models_method_and_tags_entries_with_the_model(
    agent: AgentProcess,
) -> None:
    register(agent, *PAIR)
    program = str(probe_program(PAIR))
    loaded = agent.request(
        Request.load(program, PAIR, OptionsMap(), models=(LoadSpec(program, PAIR),))
    )
    assert loaded.outcome is Outcome.OK, loaded.message
    again = agent.request(Request(Action.EXECUTE))
    assert again.outcome is Outcome.OK
    assert [(e.name, e.model, e.calls, e.executes) for e in again.entries] == [
        ("ProbeA", 0, 0, 1),
        ("ProbeB", 0, 0, 1),
        ("ProbeA", 1, 0, 1),
        ("ProbeB", 1, 0, 1),
    ]


def test_a_valid_request_is_never_capacity_on_the_hosted_agent(agent: AgentProcess) -> None:
    """Its decoder holds as many options as one valid request can carry (8 models of
    8 + 8 backends of 64 options): a LOAD of 3 models x 8 backends x 64 options is served."""
    register(agent, *PAIR)
    program = str(probe_program(PAIR))
    ids = (*PAIR, *(f"Other{i}" for i in range(6)))

    def full_map(model: int) -> OptionsMap:
        return OptionsMap.from_dict({i: {f"k{k:02d}": model for k in range(64)} for i in ids})

    models = tuple(LoadSpec(program, PAIR, full_map(m)) for m in (1, 2))
    report = agent.request(Request.load(program, PAIR, full_map(0), models=models))
    assert report.outcome is Outcome.OK, report.message
    assert [(e.name, e.model, e.options) for e in report.entries] == [
        (name, m, full_map(m).backends[i].options) for m in range(3) for i, name in enumerate(PAIR)
    ]


# --------------------------------------------------------------------------- malformed input


def _hello_frame(seq: int) -> bytes:
    return wire.encode_request(Request(Action.HELLO, seq=seq))


def _assert_rejected(report: Report, error: wire.WireErrorCode, seq: int) -> None:
    assert (report.action, report.outcome, report.detail, report.seq) == (
        Action.NONE,
        Outcome.REJECTED,
        error,
        seq,
    ), report


def test_malformed_frames_are_rejected_and_the_agent_keeps_serving(agent: AgentProcess) -> None:
    good = _hello_frame(41)

    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    _assert_rejected(agent.send_raw(bytes(bad_crc)), wire.WireErrorCode.CRC, 41)

    other_version = bytearray(good)
    other_version[4] = 1  # the layout before version 2: refused, never misread
    old = agent.send_raw(bytes(other_version))
    _assert_rejected(old, wire.WireErrorCode.VERSION, 41)
    assert "version 1, this agent speaks version 2" in old.message

    a_report = wire.encode_report(Report(Action.HELLO, Outcome.OK, seq=42))
    _assert_rejected(agent.send_raw(a_report), wire.WireErrorCode.MSG_TYPE, 42)

    unknown_action = bytearray(good[:-4])
    unknown_action[16] = 99
    _assert_rejected(
        agent.send_raw(wire.seal(bytes(unknown_action))), wire.WireErrorCode.ACTION, 41
    )

    trailing = wire.seal(good[:-4] + b"\0")
    _assert_rejected(agent.send_raw(trailing), wire.WireErrorCode.TRAILING, 41)

    # Garbage, then a message: one BAD_MAGIC report (echoing bytes 12..15 of the 16
    # judged), then the message's report.
    garbage = b"\x00garbage bytes\xffETB"
    agent.write(garbage + _hello_frame(43))
    _assert_rejected(
        agent.read_report(), wire.WireErrorCode.BAD_MAGIC, struct.unpack_from("<I", garbage, 12)[0]
    )
    assert agent.read_report().seq == 43

    # A length field over 1 MiB cannot be skipped: the agent resynchronises.
    huge = bytearray(good)
    struct.pack_into("<I", huge, 8, wire.MAX_MESSAGE + 1)
    agent.write(bytes(huge) + _hello_frame(44))
    _assert_rejected(agent.read_report(), wire.WireErrorCode.LENGTH, 41)
    assert agent.read_report().seq == 44

    assert agent.request(Request(Action.HELLO)).outcome is Outcome.OK


def test_truncated_input_at_eof_is_rejected_then_clean_exit(build: AgentBuild) -> None:
    process = AgentProcess([str(build.binary)])
    process.write(_hello_frame(7)[:20])  # header and 4 of its 25 bytes
    assert process.proc.stdin is not None
    process.proc.stdin.close()
    _assert_rejected(process.read_report(), wire.WireErrorCode.TRUNCATED, 7)
    assert process.proc.wait(timeout=TIMEOUT_S) == 0


def test_runtime_logs_go_to_stderr_never_into_the_report_stream(build: AgentBuild) -> None:
    process = AgentProcess([str(build.binary)])
    report = set_options(process, {"XnnpackBackend": {"workspace_sharing_mode": 7}})
    assert report.entries[0].status == E.InvalidArgument
    code, err = process.finish()
    assert code == 0
    assert "workspace sharing mode must be between 0 and 2" in err


# ------------------------------------------------------------------ one-shot, CLI, deployment


def test_oneshot_mode_answers_a_file_of_requests(build: AgentBuild, tmp_path: Path) -> None:
    program = probe_program(("ProbeA",))
    requests = [
        Request(Action.HELLO, seq=1),
        dataclasses.replace(Request.register(("ProbeA",)), seq=2),
        dataclasses.replace(
            Request.load(str(program), ("ProbeA",), OptionsMap.from_dict({"ProbeA": {"n": 3}})),
            seq=3,
        ),
    ]
    served = b"".join(wire.encode_request(r) for r in requests)
    blob = served + b"junk" + _hello_frame(4)
    junk_seq = struct.unpack_from("<I", blob, len(served) + 12)[0]  # bytes 12..15 judged
    (tmp_path / "requests.bin").write_bytes(blob)
    result = subprocess.run(
        [
            str(build.binary),
            "--oneshot",
            str(tmp_path / "requests.bin"),
            str(tmp_path / "reports.bin"),
        ],
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    data = (tmp_path / "reports.bin").read_bytes()
    reports = []
    while data:
        length = wire.peek_header(data).length
        reports.append(wire.decode_report(data[:length]))
        data = data[length:]
    assert [(r.seq, r.action, r.outcome) for r in reports] == [
        (1, Action.HELLO, Outcome.OK),
        (2, Action.REGISTER, Outcome.OK),
        (3, Action.LOAD, Outcome.OK),
        (junk_seq, Action.NONE, Outcome.REJECTED),
        (4, Action.HELLO, Outcome.OK),
    ]
    assert entry(reports[2], "ProbeA").options == opts(n=3)


def test_cli_usage_errors(build: AgentBuild) -> None:
    bad = subprocess.run([str(build.binary), "--bogus"], capture_output=True, timeout=TIMEOUT_S)
    assert bad.returncode == 2 and b"usage: et-agent" in bad.stderr
    version = subprocess.run(
        [str(build.binary), "--version"], capture_output=True, timeout=TIMEOUT_S
    )
    assert version.returncode == 0 and b"executorch 1.5.1" in version.stdout


def test_deployed_copy_runs_on_its_own_libraries(build: AgentBuild, tmp_path: Path) -> None:
    device_dir = tmp_path / "device"
    device_dir.mkdir()
    for path in build.deploy_files():
        shutil.copy2(path, device_dir / path.name)
    assert {p.name for p in build.libraries} >= {
        "libexecutorch.so",
        "libexecutorch_backend_xnnpack.so",
    }
    process = AgentProcess([str(device_dir / "et-agent")])
    assert process.request(Request(Action.HELLO)).outcome is Outcome.OK
    maps = Path(f"/proc/{process.proc.pid}/maps").read_text()
    for name in ("libexecutorch.so", "libexecutorch_backend_xnnpack.so"):
        assert str(device_dir / name) in maps, f"{name} not loaded from the deployed directory"
    code, err = process.finish()
    assert code == 0, err


def test_mutated_streams_never_crash_the_agent(build: AgentBuild) -> None:
    """Bit flips, cuts and resealed (CRC-valid) mutations of real requests, to EOF."""
    rng = random.Random(1234)
    program = str(probe_program(("ProbeA", "ProbeB")))
    seeds = [
        wire.encode_request(r)
        for r in (
            Request.register(("ProbeA", "ProbeB")),
            Request.load(
                program,
                ("ProbeA", "ProbeB"),
                OptionsMap.from_dict({"ProbeA": {"t": 4, "s": "x" * 40}, "ProbeB": {"b": True}}),
            ),
            Request(
                Action.SET, OptionsMap.from_dict({"ProbeA": {"k": 1}, "XnnpackBackend": {"x": 2}})
            ),
            Request(Action.GET, OptionsMap.from_dict({"ProbeB": {"k": "v"}})),
            Request(Action.EXECUTE),
        )
    ]
    chunks = list(seeds)
    for _ in range(400):
        frame = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(wire.HEADER_SIZE, len(frame) - 4)] = rng.randrange(256)
        mutated = wire.seal(bytes(frame[:-4])) if rng.random() < 0.7 else bytes(frame)
        if rng.random() < 0.1:
            mutated = mutated[: rng.randrange(len(mutated))]
        chunks.append(mutated)
    result = subprocess.run(
        [str(build.binary)], input=b"".join(chunks), capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    data, reports = result.stdout, 0
    while data:
        length = wire.peek_header(data).length
        wire.decode_report(data[:length])
        data, reports = data[length:], reports + 1
    assert reports >= len(seeds)


@pytest.mark.slow
def test_arm64_agent_under_qemu(tmp_path: Path) -> None:
    """The agent cross-built against the aarch64 wheel serves the same requests under QEMU."""
    require("aarch64-linux-gnu-g++", "qemu-aarch64")
    arm = ensure_agent("aarch64")
    assert arm.binary.read_bytes()[18:20] == struct.pack("<H", 183)  # ELF e_machine EM_AARCH64
    device_dir = tmp_path / "arm64-device"
    device_dir.mkdir()
    for path in arm.deploy_files():
        shutil.copy2(path, device_dir / path.name)
    process = AgentProcess(
        ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(device_dir / "et-agent")]
    )
    hello = process.request(Request(Action.HELLO))
    assert (hello.fact("abi"), hello.fact("runtime")) == ("aarch64", "executorch 1.5.1")
    register(process, "ProbeA", "ProbeB")
    report = load(
        process,
        ("ProbeB", "ProbeA"),
        OptionsMap.from_dict({"ProbeA": {"n": 1}, "ProbeB": {"s": "arm64"}}),
    )
    assert report.outcome is Outcome.OK, report.message
    assert [(e.name, e.options) for e in report.entries] == [
        ("ProbeB", opts(s="arm64")),
        ("ProbeA", opts(n=1)),
    ]
    refused = set_options(process, {"XnnpackBackend": {"workspace_sharing_mode": 3}})
    assert refused.entries[0].status == E.InvalidArgument
    code, err = process.finish()
    assert code == 0, err


def test_a_failing_build_names_its_log(
    build: AgentBuild,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness.runtime import agent_build

    broken = tmp_path / "runtime"
    shutil.copytree(agent_build.agent_sources(), broken)
    cmake_lists = broken / "CMakeLists.txt"
    cmake_lists.write_text(cmake_lists.read_text() + '\nmessage(FATAL_ERROR "broken on purpose")\n')
    cache = tmp_path / "cache"
    (cache / "sdk").mkdir(parents=True)
    (cache / "sdk" / build.sdk.root.name).symlink_to(build.sdk.root)  # no second download
    monkeypatch.setenv("ET_HARNESS_CACHE", str(cache))
    monkeypatch.setattr(agent_build, "agent_sources", lambda: broken)

    with pytest.raises(agent_build.AgentBuildFailed) as failure:
        agent_build.ensure_agent("x86_64")
    assert failure.value.log.is_file() and str(failure.value.log) in str(failure.value)
    assert "broken on purpose" in str(failure.value)  # the log's tail is in the message
    assert "building ExecuTorch device agent for x86_64 (first run" in capsys.readouterr().err
    assert not list((cache / "agent").glob("*/complete"))  # nothing passes for a build


def test_unknown_abi_has_no_build() -> None:
    from harness.runtime.agent_build import UnsupportedAgentAbi

    with pytest.raises(UnsupportedAgentAbi, match=r"android-arm64\.md"):
        ensure_agent("arm64-v8a")


# --------------------------------------------------------------------------- issue #33's rules


def test_an_agent_without_uploads_answers_actions_9_and_10_action_whatever_follows(
    agent: AgentProcess,
) -> None:
    """docs/wire-format.md, Actions: the upload actions are version 2's, and a device
    without uploads answers them ACTION at the action byte, valid body or not."""
    for name in (
        "req_program_data",
        "req_program_end",
        "bad_program_data_length_past_body",
        "bad_program_end_trailing",
    ):
        data = load_vector(name)[0]
        seq = struct.unpack_from("<I", data, 12)[0]
        _assert_rejected(agent.send_raw(data), wire.WireErrorCode.ACTION, seq)
    assert "program_data" not in str(agent.request(Request(Action.HELLO)).fact("capabilities"))


def test_a_load_of_one_model_reports_no_models_fact(agent: AgentProcess) -> None:
    """docs/wire-format.md, Several models: only a LOAD of more than one model says how many."""
    register(agent, *PAIR)
    program = str(probe_program(PAIR))
    one = agent.request(Request.load(program, PAIR, OptionsMap()))
    assert (one.outcome, one.fact("models")) == (Outcome.OK, None)
    two = agent.request(
        Request.load(program, PAIR, OptionsMap(), models=(LoadSpec(program, PAIR),))
    )
    assert (two.outcome, two.fact("models")) == (Outcome.OK, 2)


def test_an_empty_program_names_no_file(agent: AgentProcess) -> None:
    """docs/wire-format.md, Request body: on a device with a file system an empty
    ``program`` is InvalidArgument for that model, nothing loaded (an upload device
    reads it as the program held last)."""
    report = agent.request(Request.load("", (), OptionsMap()))
    assert (report.outcome, report.detail, report.entries) == (
        Outcome.RUNTIME_ERROR,
        E.InvalidArgument,
        (),
    )
    assert "needs a program path" in report.message
    assert agent.request(Request(Action.EXECUTE)).detail == E.InvalidState  # nothing loaded
