"""Repository-wide pytest configuration.

The harness's own pytest plugin (``harness.pytest_plugin``: ``--device`` and the
``et`` fixture) is registered through the package's ``pytest11`` entry point, so it
also works for suites kept outside this repository. Here: Hypothesis profiles.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Device round trips vary with load; Hypothesis must not call a slow example a failure.
settings.register_profile("dev", deadline=None)
# CI: the same, plus the seed printed with any failure so that it can be replayed.
settings.register_profile(
    "ci", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
