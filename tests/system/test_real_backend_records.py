"""The agent's records of the real backends (docs/agent.md, "Records for real backends"),
read straight from the host agent: every real backend in HELLO is recorded; a LOAD entry
of a real delegate carries what its ``init`` was handed, its compile-spec keys, its own
return code and its execute count; ``--no-records`` turns them off."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_agent_host
from test_agent_host import REAL_BACKENDS, AgentProcess, opts

from harness.data.messages import Action, Outcome, Report, Request
from harness.data.options import OptionsMap, OptionValue
from harness.data.runtime_error import RuntimeErrorCode as E
from harness.profiles.device_profile import ProfileError, load_profile
from harness.programs.xnnpack import XNNPACK_BACKEND, expected_output, xnnpack_program
from harness.runner import open_runner
from harness.runtime.agent_build import AgentBuild

agent = test_agent_host.agent  # the fixtures, shared
build = test_agent_host.build


def load_xnnpack(agent: AgentProcess, options: OptionsMap, probes: tuple[str, ...] = ()) -> Report:
    delegates = (*probes, XNNPACK_BACKEND)
    return agent.request(Request.load(str(xnnpack_program(probes)), delegates, options))


def test_hello_names_every_real_backend_as_recorded(agent: AgentProcess) -> None:
    hello = agent.request(Request(Action.HELLO))
    assert hello.fact("recorded") == ",".join(REAL_BACKENDS)
    # Each is still registered under its own name.
    assert [e.name for e in hello.entries] == list(REAL_BACKENDS)


def test_a_real_delegate_records_what_its_init_was_handed(agent: AgentProcess) -> None:
    specs: dict[str, OptionValue] = {
        "workspace_sharing_mode": 1,
        "weight_cache_enabled": False,
        "x": "y",
    }
    report = load_xnnpack(agent, OptionsMap.from_dict({XNNPACK_BACKEND: specs}))
    assert report.outcome is Outcome.OK, report.message
    (xnn,) = report.entries
    assert (xnn.name, xnn.status, xnn.calls, xnn.executes, xnn.flags) == (
        XNNPACK_BACKEND,
        E.Ok,
        1,
        1,
        0,
    )
    assert xnn.is_recorded and not xnn.is_probe
    assert xnn.delivered == opts(**specs)
    assert xnn.backend_status == E.Ok
    # XNNPACK's serializer writes no compile specs into this program's delegate.
    assert xnn.compile_specs == ()
    assert report.fact("outputs") == expected_output()  # the call reached XNNPACK


def test_a_failing_init_records_the_backends_own_return(agent: AgentProcess) -> None:
    options = OptionsMap.from_dict({XNNPACK_BACKEND: {"workspace_sharing_mode": 3}})
    report = load_xnnpack(agent, options)
    assert report.outcome is Outcome.RUNTIME_ERROR
    (xnn,) = report.entries
    assert (xnn.calls, xnn.backend_status, xnn.delivered) == (
        1,
        E.InvalidArgument,
        opts(workspace_sharing_mode=3),
    )


def test_a_backend_given_nothing_records_an_empty_span(agent: AgentProcess) -> None:
    agent.request(Request.register(("ProbeA",)))
    report = load_xnnpack(agent, OptionsMap.from_dict({"ProbeA": {"k": 1}}), ("ProbeA",))
    assert report.outcome is Outcome.OK, report.message
    xnn = report.entry(XNNPACK_BACKEND)
    assert xnn is not None and xnn.is_recorded
    assert (xnn.calls, xnn.delivered) == (1, ())


def test_a_get_records_both_ends_of_the_call(agent: AgentProcess) -> None:
    """What OpenvinoBackend's get_option left (it leaves every value as it is) and what the
    runtime's get_option handed back to the agent, after the annotations."""
    asked: dict[str, OptionValue] = {"num_threads": -1, "device": "x", "cache": False}
    report = agent.request(Request(Action.GET, OptionsMap.from_dict({"OpenvinoBackend": asked})))
    (ov,) = report.entries
    assert (ov.name, ov.status, ov.calls, ov.is_recorded) == ("OpenvinoBackend", E.Ok, 1, True)
    assert ov.delivered == ov.caller_received == opts(**asked)
    # Each end holds at most 30 options, so that both fit one entry of 64.
    many = {f"key{i:02d}": i for i in range(40)}
    report = agent.request(Request(Action.GET, OptionsMap.from_dict({"OpenvinoBackend": many})))
    (ov,) = report.entries
    assert ov.delivered == ov.caller_received == opts(**dict(list(many.items())[:30]))
    assert len(ov.options) == 63


def test_no_records_leaves_the_entries_as_before(build: AgentBuild) -> None:
    process = AgentProcess([str(build.binary), "--no-records"])
    assert process.request(Request(Action.HELLO)).fact("recorded") is None
    report = load_xnnpack(process, OptionsMap.from_dict({XNNPACK_BACKEND: {"x": 1}}))
    assert report.outcome is Outcome.OK, report.message
    (xnn,) = report.entries
    assert (xnn.calls, xnn.options, xnn.is_recorded) == (0, (), False)
    assert report.fact("outputs") == expected_output()
    code, err = process.finish()
    assert code == 0, err


def test_a_profile_turns_the_records_off(tmp_path: Path) -> None:
    text = f"transport: {{kind: local}}\nwork_dir: {tmp_path / 'device'}\n"
    on, off = tmp_path / "on.yaml", tmp_path / "off.yaml"
    on.write_text(text, encoding="utf-8")
    off.write_text(text + "agent: {records: false}\n", encoding="utf-8")
    for path, recorded in ((on, ",".join(REAL_BACKENDS)), (off, None)):
        device, runner = open_runner(load_profile(str(path)))
        try:
            assert runner.hello.fact("recorded") == recorded
            assert runner.recorded == (REAL_BACKENDS if recorded else ())
        finally:
            runner.close()
            device.close()
    bad = tmp_path / "bad.yaml"
    bad.write_text("transport: {kind: local}\nagent: {records: 1}\n", encoding="utf-8")
    with pytest.raises(ProfileError, match=r"bad\.yaml: agent\.records: must be true"):
        load_profile(str(bad))
