"""Pure data, shared by every layer: the options map (:mod:`.options`), requests and
reports (:mod:`.messages`), the runtime's error codes (:mod:`.runtime_error`), and
Hypothesis strategies for valid maps (:mod:`.strategies`, for property-based suites).

Nothing here does I/O or knows a device. Users import the options map as
:mod:`harness.options` (its public name, a re-export of :mod:`.options`).
"""
