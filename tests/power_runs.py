"""How the tests that measure the suites' power run them: in a pytest of their own, with
the plugins of ``tests/faults/``: ``generate_only`` (Hypothesis does not shrink what it
finds, and keeps no examples in the checkout) and ``first_catch`` (each device stops at
its first failing test)."""

from __future__ import annotations

import os
from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parent / "faults"
PYTEST_ARGS = ("-p", "generate_only", "-p", "first_catch")


def environment(**variables: str) -> dict[str, str]:
    """This process's environment with ``variables``, the plugin importable, and bytecode
    written: under ``PYTHONDONTWRITEBYTECODE`` every run would compile and assertion-rewrite
    every module again (~5 s each); so the first run caches them and the others read them."""
    env = {**os.environ, **variables}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), env.get("PYTHONPATH")]))
    return env
