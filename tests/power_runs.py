"""How the tests that measure the suites' power run them: in a pytest of their own, with
the ``generate_only`` plugin (``tests/faults/generate_only.py``: Hypothesis does not
shrink what it finds, and keeps no examples in the checkout)."""

from __future__ import annotations

import os
from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parent / "faults"
PYTEST_ARGS = ("-p", "generate_only")


def environment(**variables: str) -> dict[str, str]:
    """This process's environment with ``variables``, the plugin importable, and bytecode
    written: under ``PYTHONDONTWRITEBYTECODE`` every run would compile and assertion-rewrite
    every module again (~5 s each); so the first run caches them and the others read them."""
    env = {**os.environ, **variables}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), env.get("PYTHONPATH")]))
    return env
