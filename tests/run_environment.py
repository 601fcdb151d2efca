"""The environment of a pytest run that a test starts outside this pytest process."""

from __future__ import annotations

import os

# labgrid's own pytest plugin (installed with the [lab] extra) imports all of labgrid, ~0.4 s
# of CPU in every pytest process; no run a test starts uses it. pyproject.toml blocks it for
# runs in the checkout; this blocks it for runs elsewhere too.
_NO_LABGRID_PLUGIN = "-p no:labgrid"


def run_environment(*, labgrid_plugin: bool = False, **variables: str) -> dict[str, str]:
    """This process's environment without pytest's own variables (``PYTEST_CURRENT_TEST``,
    xdist's ``PYTEST_XDIST_WORKER``...), as a shell has it, with ``variables``; labgrid's
    pytest plugin blocked unless ``labgrid_plugin`` (a user's environment with the [lab]
    extra loads it beside the harness's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    if not labgrid_plugin:
        env["PYTEST_ADDOPTS"] = _NO_LABGRID_PLUGIN
    return {**env, **variables}
