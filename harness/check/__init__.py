"""The exactness check: what the host sent against what each backend reported.

:func:`check_load`, :func:`check_set` and :func:`check_get` compare a request's
options map with the device's :class:`~harness.model.messages.Report` and return a
:class:`Verdict` that names every difference (:class:`DifferenceKind`). Options
are compared strictly: the same key, the same type (``True`` never equals ``1``),
the same value and the same order. ``verdict.raise_for_differences()`` raises
:class:`DeliveryMismatch`, whose message is :meth:`Verdict.render`: per backend,
the sent and received options aligned side by side, differing lines marked.

``model`` holds the verdict's types, ``comparison`` the checks, ``rendering`` the text.
"""

from harness.check.comparison import check_get, check_load, check_set
from harness.check.model import (
    BackendOutcome,
    DeliveryMismatch,
    Difference,
    DifferenceKind,
    DifferenceValue,
    OptionRow,
    Verdict,
)
from harness.check.rendering import format_value, show_name

__all__ = [
    "BackendOutcome",
    "DeliveryMismatch",
    "Difference",
    "DifferenceKind",
    "DifferenceValue",
    "OptionRow",
    "Verdict",
    "check_get",
    "check_load",
    "check_set",
    "format_value",
    "show_name",
]
