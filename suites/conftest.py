"""Device test suites: run with ``pytest suites --device NAME``.

The fixtures (``et``, ``device``, ``probe_program``) come from the harness's
pytest plugin (harness/pytest_plugin/__init__.py).
"""
