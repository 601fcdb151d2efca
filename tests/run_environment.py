"""The environment of a pytest run that a test starts outside this pytest process."""

from __future__ import annotations

import os

# Third-party pytest plugins that no run a test starts uses, blocked unless asked for:
# - labgrid's (installed with the [lab] extra) imports all of labgrid, ~0.4 s of CPU in
#   every pytest process (pyproject.toml blocks it for runs in the checkout);
# - Hypothesis's imports all of Hypothesis at the end of every run (its terminal summary),
#   ~0.17 s of CPU, whether or not a test used it; @given works without it (it adds its
#   command-line options and the health check on function-scoped fixtures).
_UNUSED_PLUGINS = "-p no:labgrid -p no:hypothesispytest"


def run_environment(*, all_plugins: bool = False, **variables: str) -> dict[str, str]:
    """This process's environment without pytest's own variables (``PYTEST_CURRENT_TEST``,
    xdist's ``PYTEST_XDIST_WORKER``...), as a shell has it, with ``variables``; labgrid's
    and Hypothesis's pytest plugins blocked unless ``all_plugins`` (a user's environment
    loads every plugin installed beside the harness)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    if not all_plugins:
        env["PYTEST_ADDOPTS"] = _UNUSED_PLUGINS
    return {**env, **variables}
