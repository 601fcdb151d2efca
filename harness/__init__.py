"""ExecuTorch backend-options hardware-in-the-loop harness."""

__version__ = "0.2.0"  # the one place: pyproject.toml reads it, run.json and the history record it
