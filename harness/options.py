"""The options map, under the name users import it by: ``from harness.options import ...``.

Suites, map-building helpers and docs/ use this name; it is part of the harness's public
interface, as :mod:`harness.check` is for verdicts. The definitions live in
:mod:`harness.data.options` with the rest of the pure data (docs/architecture.md), and
this module only re-exports them: the two names are the same objects, and
``tests/unit/test_options.py`` keeps this list equal to that module's public names and the
map file's two: :func:`load_map` (a map file, YAML or JSON, docs/map-files.md) and its
:class:`MapFileError`, from :mod:`harness.codec.mapfile`. One more name,
``options_maps`` (Hypothesis strategies for valid maps, for property-based suites,
:mod:`harness.data.strategies`), is imported when first used, as it loads Hypothesis.
"""

from typing import Any

from harness.codec.mapfile import MapFileError, load_map
from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_LOAD_BACKENDS,
    MAX_OPTIONS_PER_BACKEND,
    MAX_STRING_BYTES,
    BackendOptions,
    MapValidationError,
    Option,
    OptionsMap,
    OptionType,
    OptionValue,
    backend_path,
)

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "MAX_ID_BYTES",
    "MAX_KEY_BYTES",
    "MAX_LOAD_BACKENDS",
    "MAX_OPTIONS_PER_BACKEND",
    "MAX_STRING_BYTES",
    "BackendOptions",
    "MapFileError",
    "MapValidationError",
    "Option",
    "OptionType",
    "OptionValue",
    "OptionsMap",
    "backend_path",
    "load_map",
    "options_maps",  # noqa: F822 -- defined by __getattr__ below, on first use
]


def __getattr__(name: str) -> Any:
    """``options_maps``, from :mod:`harness.data.strategies` on first use."""
    if name == "options_maps":
        from harness.data.strategies import options_maps

        return options_maps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
