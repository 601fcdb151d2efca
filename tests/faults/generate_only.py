"""A pytest plugin for the suite runs that measure the suites' power (``-p generate_only``).

Those runs ask one thing: does some test fail with a delivery difference? Hypothesis
finds its failing example in the generate phase; shrinking it afterwards only makes it
smaller, and on a fault that every example trips it re-runs a property test hundreds of
times (one fault's run took 36 s with shrinking, 5 s without). So these runs generate
and stop at the first failure. No example database either: a fault run's failing
examples would otherwise be kept in the checkout's ``.hypothesis/`` and replayed by the
next, fault-free run.

Imported before the suites are collected, so every ``@settings`` of theirs inherits it.
"""

from hypothesis import Phase, settings

settings.register_profile("generate-only", phases=[Phase.explicit, Phase.generate], database=None)
settings.load_profile("generate-only")
