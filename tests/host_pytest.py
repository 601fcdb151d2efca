"""A pytest run on the host device with the real agent, in a subprocess (pytester), for
tests of what a run shows: its outcomes, terminal summary and results directory."""

from __future__ import annotations

import pytest

from harness.lifecycle.cache import cache_root

CACHE = cache_root()  # read before pytester points HOME at its directory


def run_on_host(
    pytester: pytest.Pytester,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    device: str = "host",
    **files: str,
) -> pytest.RunResult:
    """``files`` (module name -> source) run with ``--device host`` (or ``device``, a
    profile's path), the project's profiles,
    results in ``pytester.path / "results"``; the run keeps the harness cache it would have
    had, or it would build the host agent afresh."""
    monkeypatch.setenv("ET_HARNESS_CACHE", str(CACHE))
    pytester.makepyfile(**files)
    return pytester.runpytest_subprocess(
        "--device",
        device,
        "--devices-dir",
        str(request.config.rootpath / "devices"),
        "-p",
        "no:cacheprovider",
        "--results-dir",
        str(pytester.path / "results"),
        timeout=300,
    )
