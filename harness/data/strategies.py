"""Hypothesis strategies for valid options maps, for property-based device suites."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal

from hypothesis import strategies as st

from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_KEY_BYTES,
    MAX_LOAD_BACKENDS,
    MAX_STRING_BYTES,
    BackendOptions,
    Option,
    OptionsMap,
)

# Any code point but surrogates (not UTF-8) and NUL (the runtime's strings end at it).
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # annotated: mypy infers a bare tuple as tuple[str]
_CHARS = st.characters(exclude_categories=_SURROGATES, exclude_characters="\0")


def _text_within(min_bytes: int, max_bytes: int) -> st.SearchStrategy[str]:
    """Text of ``min_bytes``..``max_bytes`` bytes of UTF-8 (``max_bytes`` >= 4).

    Cut, not filtered: a string over the limit is cut at the last whole character that
    fits, so long multi-byte strings land near the limit instead of being drawn again."""
    return st.text(_CHARS, min_size=min_bytes, max_size=max_bytes).map(
        functools.partial(_cut, max_bytes=max_bytes)
    )


def _cut(text: str, max_bytes: int) -> str:
    return text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")


keys = _text_within(1, MAX_KEY_BYTES)
"""Option keys: 1..63 bytes of UTF-8."""

values = st.one_of(
    st.booleans(),
    st.integers(INT32_MIN, INT32_MAX),
    st.sampled_from([INT32_MIN, INT32_MAX, 0, -1]),
    _text_within(0, MAX_STRING_BYTES),
)
"""Option values: bool, int32 (limits favoured), or strings of 0..255 bytes."""


@functools.cache  # built once per backend: options_maps draws it for every example
def backend_options(backend_id: str, max_options: int = 8) -> st.SearchStrategy[BackendOptions]:
    """Options for ``backend_id`` with distinct keys."""
    return st.lists(
        st.tuples(keys, values), max_size=max_options, unique_by=lambda pair: pair[0]
    ).map(lambda pairs: BackendOptions(backend_id, tuple(Option(k, v) for k, v in pairs)))


@st.composite
def options_maps(
    draw: st.DrawFn,
    backend_ids: Sequence[str],
    max_backends: int = MAX_LOAD_BACKENDS,
    max_options: int = 8,
) -> OptionsMap:
    """Valid maps over a subset of ``backend_ids`` (a fixed pool keeps registries small)."""
    chosen = draw(
        st.lists(
            st.sampled_from(tuple(backend_ids)),
            unique=True,
            max_size=min(max_backends, len(backend_ids)),
        )
    )
    return OptionsMap(tuple(draw(backend_options(b, max_options)) for b in chosen))
