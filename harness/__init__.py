"""ExecuTorch backend-options hardware-in-the-loop harness.

PYTEST_DONT_REWRITE: ``et-harness run`` imports this package before it starts pytest in
its own process, so pytest cannot rewrite this module's asserts (it has none) and would
warn about it in every run.
"""

__version__ = "0.2.0"  # the one place: pyproject.toml reads it, run.json and the history record it
