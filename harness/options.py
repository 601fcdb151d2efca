"""The options map, under the name users import it by: ``from harness.options import ...``.

Suites, map-building helpers and docs/ use this name; it is part of the harness's public
interface, as :mod:`harness.check` is for verdicts. The definitions live in
:mod:`harness.model.options` with the rest of the pure data (docs/architecture.md), and
this module only re-exports them: the two names are the same objects, and
``tests/test_options.py`` keeps this list equal to that module's public names.
"""

from harness.model.options import (
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
    "MapValidationError",
    "Option",
    "OptionType",
    "OptionValue",
    "OptionsMap",
    "backend_path",
]
