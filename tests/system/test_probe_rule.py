"""Which names the harness registers as probes (harness/runner/probes.py), on the host's real
runtime: its own names (Probe...) and declared ones only; any other name the device lacks
gets the runtime's answer, named in the verdict as the device having no such backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from host_pytest import run_on_host

from harness.check import DifferenceKind, NoEffectWarning, RuntimeErrorCode
from harness.data.options import OptionsMap
from harness.profiles.device_profile import load_profile
from harness.runner import CaseRunner, RunnerError, open_runner

pytest_plugins = ["pytester"]
REAL = ("QnnBackend", "OpenvinoBackend", "XnnpackBackend")


@pytest.fixture
def runner() -> Iterator[CaseRunner]:
    device, runner = open_runner(load_profile("host"))
    try:
        yield runner
    finally:
        runner.close()
        device.close()


def test_set_and_get_of_a_name_the_device_lacks_are_no_such_backend(runner: CaseRunner) -> None:
    options = OptionsMap.from_dict({"ProbeA": {"a": 1}, "NpuBackend": {"num_threads": 2}})
    verdict = runner.set(options)
    assert verdict.kinds() == (DifferenceKind.NO_SUCH_BACKEND,)
    assert "NpuBackend" not in runner.registered and "ProbeA" in runner.registered
    npu = verdict.backend("NpuBackend")
    assert npu is not None and npu.absent and npu.entry is not None
    assert npu.entry.status == RuntimeErrorCode.NotFound
    assert runner.get(options).kinds() == (DifferenceKind.NO_SUCH_BACKEND,)
    expected = runner.set(options, {"NpuBackend": RuntimeErrorCode.NotFound})
    assert expected.ok
    assert "backend NpuBackend: ok, as expected (status NotFound (0x20), no such backend " in (
        expected.render()
    )


def test_a_declared_probe_is_registered_and_said_so(runner: CaseRunner) -> None:
    from harness.runner.probes import ProbeRuleError

    options = OptionsMap.from_dict({"NpuBackend": {"num_threads": 2}})
    verdict = runner.set(options, probes=("NpuBackend",))
    assert verdict.ok and "NpuBackend" in runner.registered
    assert "set_option called once, probe registered by the harness)" in verdict.render()
    with pytest.raises(ProbeRuleError, match="probe XnnpackBackend: the device has a real"):
        runner.set(options, probes=("XnnpackBackend",))


def test_a_probe_declared_by_an_earlier_case_is_no_backend_in_the_next(
    runner: CaseRunner,
) -> None:
    """The runtime cannot unregister a declared probe: a later case that does not declare
    it gets a fresh agent, so the device lacks it again (never "exact" by accident); a
    declaration holds for the rest of its own case."""
    options = OptionsMap.from_dict({"ProbeA": {"a": 1}, "NpuBackend": {"num_threads": 2}})
    assert runner.load(options, probes=("NpuBackend",)).ok
    assert runner.set(options).ok  # the same case: still declared
    runner.reset()  # the next case
    assert runner.set(OptionsMap.from_dict({"ProbeA": {"a": 2}})).ok
    with pytest.raises(RunnerError, match="NpuBackend: a probe an earlier case declared"):
        runner.set(options)
    runner.reset()
    for call in (runner.set, runner.get, runner.load):
        verdict = call(options)
        assert verdict.kinds() == (DifferenceKind.NO_SUCH_BACKEND,), verdict.render()
        assert "NpuBackend" not in runner.registered
        runner.reset()
    runner.prepare(["NpuBackend"])  # declares it for the case, as probes= does
    assert runner.set(options).ok and "NpuBackend" in runner.registered


def test_a_load_checks_its_probes_and_xnnpack_and_names_what_the_device_lacks(
    runner: CaseRunner,
) -> None:
    options = OptionsMap.from_dict(
        {
            "XnnpackBackend": {"workspace_sharing_mode": 1},
            "ProbeA": {"a": 1},
            "XnnpackBakend": {"num_threads": 2},
        }
    )
    with pytest.warns(NoEffectWarning, match="XnnpackBakend: no backend has this id"):
        verdict = runner.load(options)
    assert verdict.kinds() == (DifferenceKind.NO_SUCH_BACKEND,)
    assert [b.name for b in verdict.backends if b.ok] == ["ProbeA", "XnnpackBackend"]
    assert verdict.ignored_backends == ()
    assert "XnnpackBakend" not in runner.registered


def test_the_load_plan() -> None:
    """Probes in map order, then XnnpackBackend (unobserved when not recorded); a name
    that is neither the device's nor a probe is absent; kept probes are probes."""
    from harness.runner.probes import ProbeRuleError, plan_load

    options = OptionsMap.from_dict(
        {"XnnpackBackend": {}, "Kept": {}, "ProbeC": {}, "Mine": {}, "Typo": {}}
    )
    plan = plan_load(
        options, registered=(*REAL, "Kept"), real=REAL, recorded=(), declared=("Mine",)
    )
    assert plan.delegates == ("Kept", "ProbeC", "Mine", "XnnpackBackend")
    assert (plan.unobserved, plan.absent) == (("XnnpackBackend",), ("Typo",))
    with pytest.raises(ProbeRuleError, match="nothing to load: the map's backends \\(Typo\\)"):
        plan_load(OptionsMap.from_dict({"Typo": {}}), registered=REAL, real=REAL, recorded=REAL)


TYPO = """
from harness.options import OptionsMap


def test_a_typo(et):
    et.set(OptionsMap.from_dict({"XnnpackBakend": {"num_threads": 2}})).raise_for_differences()
"""


@pytest.mark.slow
def test_the_run_summary_counts_a_name_the_device_lacks_as_wrong(
    pytester: pytest.Pytester, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-backend table of a pytest run: the misspelled id is no exact check."""
    result = run_on_host(pytester, request, monkeypatch, test_typo=TYPO)
    result.assert_outcomes(failed=1)
    [row] = [line.split() for line in result.outlines if line.startswith("XnnpackBakend ")]
    assert row[:4] == ["XnnpackBakend", "1", "0", "1"], row  # checks, exact, wrong
    assert "NO_SUCH_BACKEND" in result.stdout.str()
