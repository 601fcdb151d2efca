"""The device suites: each backend gets exactly its own options, on every path a device serves.

Run with ``pytest --device NAME`` in the harness's checkout, ``et-harness run`` or
``pytest --pyargs harness.suites`` where the harness is installed (docs/testing.md).
"""
