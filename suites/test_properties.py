"""Property-based: generated valid maps go through the real runtime exactly."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from harness.options import options_maps

# A fixed pool of names keeps the device's registry (16 slots) from filling up; declared
# probes (probes=), as they are not the harness's own names (Probe...).
NAMES = tuple(f"Gen{i}" for i in range(10))

_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(options=options_maps(backend_ids=NAMES))
def test_generated_maps_are_delivered_exactly_at_load(et, load_path, options):
    et.reset()
    delegates = options.backend_ids or NAMES[:1]
    et.load(options, delegates=delegates, path=load_path, probes=NAMES).raise_for_differences()


@_SETTINGS
@given(options=options_maps(backend_ids=NAMES))
def test_generated_maps_are_delivered_exactly_by_set_option(et, options):
    et.reset()
    et.set(options, probes=NAMES).raise_for_differences()
