"""harness.data.options: the options map model, its runtime limits and its error messages."""

from __future__ import annotations

import enum
from collections.abc import Callable

import pytest

from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_KEY_BYTES,
    MAX_STRING_BYTES,
    BackendOptions,
    MapValidationError,
    Option,
    OptionsMap,
    OptionType,
)


def one(value: object, key: str = "k", backend: str = "XnnpackBackend") -> OptionsMap:
    return OptionsMap.from_dict({backend: {key: value}})  # type: ignore[dict-item]


def refused(build: Callable[[], object]) -> MapValidationError:
    with pytest.raises(MapValidationError) as info:
        build()
    return info.value


# ------------------------------------------------------------------------ the model


def test_a_map_keeps_backend_and_option_order() -> None:
    m = OptionsMap.from_dict({"B": [("z", 1), ("a", True)], "A": {"path": "/tmp", "n": -1}})
    assert m.backend_ids == ("B", "A")
    assert m.to_dict() == {"B": [("z", 1), ("a", True)], "A": [("path", "/tmp"), ("n", -1)]}
    assert m.for_backend("A") == BackendOptions("A", (Option("path", "/tmp"), Option("n", -1)))
    assert m.for_backend("C") is None
    assert m.for_backend("B").get("a") is True  # type: ignore[union-attr]
    assert m.for_backend("B").get("missing") is None  # type: ignore[union-attr]


def test_the_empty_map_is_valid() -> None:
    assert OptionsMap().backends == () and OptionsMap.from_dict({}).checked


def test_lists_are_kept_as_tuples_so_maps_compare_and_hash() -> None:
    listed = OptionsMap([BackendOptions("A", [Option("k", 1)])])  # type: ignore[arg-type]
    assert listed == OptionsMap((BackendOptions("A", (Option("k", 1),)),))
    assert hash(listed) == hash(OptionsMap.from_dict({"A": {"k": 1}}))


# ------------------------------------------------------------------------ bool versus int


def test_option_types_follow_the_python_type_exactly() -> None:
    assert OptionType.of(True) is OptionType.BOOL
    assert OptionType.of(0) is OptionType.INT
    assert OptionType.of("") is OptionType.STRING
    assert [int(t) for t in OptionType] == [1, 2, 3]


def test_bool_and_int_options_are_never_equal() -> None:
    assert Option("k", True) != Option("k", 1)
    assert Option("k", False) != Option("k", 0)
    assert Option("k", 1) == Option("k", 1)
    assert one(True) != one(1)
    assert len({Option("k", True), Option("k", 1)}) == 2


class Level(enum.IntEnum):
    HIGH = 2


@pytest.mark.parametrize("value", [1.0, None, b"bytes", Level.HIGH, [1]])
def test_other_python_types_are_refused(value: object) -> None:
    error = refused(lambda: one(value))
    assert error.path == "backends.XnnpackBackend[0].value"
    assert "is not an option type; use bool, int (32-bit) or str" in str(error)
    with pytest.raises(TypeError):
        OptionType.of(value)


# ------------------------------------------------------------------------ limits


@pytest.mark.parametrize(
    "key", ["k" * 63, "€" * 21, "k"], ids=["63_bytes", "63_bytes_multibyte", "1_byte"]
)
def test_keys_up_to_63_bytes(key: str) -> None:
    assert one(1, key=key).backends[0].options[0].key == key


@pytest.mark.parametrize(
    "key", ["k" * 64, "😀" * 16, ""], ids=["64_bytes", "16_chars_64_bytes", "empty"]
)
def test_keys_beyond_63_bytes_or_empty(key: str) -> None:
    error = refused(lambda: one(1, key=key))
    size = len(key.encode())
    assert error.path == "backends.XnnpackBackend[0].key"
    assert f"key is {size} bytes of UTF-8, limit 1..63 bytes; shorten the key" in str(error)
    assert error.value == key


def test_string_values_up_to_255_bytes() -> None:
    assert one("v" * 255) and one("€" * 85) and one("")


@pytest.mark.parametrize("value", ["v" * 256, "😀" * 64])
def test_string_values_beyond_255_bytes(value: str) -> None:
    error = refused(lambda: one(value, key="packed_cache_path"))
    assert str(error).startswith(
        "backends.XnnpackBackend[0].value: string option 'packed_cache_path' is 256 bytes "
        "of UTF-8, limit 0..255 bytes; the runtime would truncate it"
    )


@pytest.mark.parametrize("value", [INT32_MIN, -1, 0, INT32_MAX])
def test_ints_within_int32(value: int) -> None:
    assert one(value).backends[0].options[0].value == value


@pytest.mark.parametrize("value", [INT32_MIN - 1, INT32_MAX + 1, 2**63])
def test_ints_beyond_int32_name_key_limit_and_value(value: int) -> None:
    error = refused(lambda: one(value, key="workspace_sharing_mode"))
    assert str(error) == (
        "backends.XnnpackBackend[0].value: int option 'workspace_sharing_mode' is outside "
        f"int32 (-2147483648..2147483647), the runtime's int; got {value}"
    )
    assert error.value == value


@pytest.mark.parametrize("backend", ["P" * 63, "€" * 21, "P"])
def test_backend_ids_up_to_63_bytes(backend: str) -> None:
    assert one(1, backend=backend).backend_ids == (backend,)


@pytest.mark.parametrize("backend", ["P" * 64, "😀" * 16, ""])
def test_backend_ids_beyond_63_bytes_or_empty(backend: str) -> None:
    error = refused(lambda: one(1, backend=backend))
    assert error.path == f"backends.{backend}"
    assert "backend id is" in str(error) and "limit 1..63 bytes" in str(error)


def test_64_options_per_backend_and_not_65() -> None:
    keys = [f"key{i}" for i in range(65)]
    assert len(OptionsMap.from_dict({"A": {k: 1 for k in keys[:64]}}).backends[0].options) == 64
    error = refused(lambda: OptionsMap.from_dict({"A": {k: 1 for k in keys}}))
    assert str(error) == (
        "backends.A: backend 'A' has 65 options, limit 64 per backend (wire format v2); "
        "split the map; got 65"
    )


def test_8_backends_and_not_9() -> None:
    ids = [f"Probe{i}" for i in range(9)]
    assert len(OptionsMap.from_dict({i: {} for i in ids[:8]}).backends) == 8
    error = refused(lambda: OptionsMap.from_dict({i: {} for i in ids}))
    assert error.path == "backends"
    assert "9 backends, limit 8 (LoadBackendOptionsMap capacity); split the map" in str(error)
    assert error.value == ids


@pytest.mark.parametrize(
    ("build", "path"),
    [
        (lambda: one(1, key="a\0b"), "backends.XnnpackBackend[0].key"),
        (lambda: one("a\0"), "backends.XnnpackBackend[0].value"),
        (lambda: one(1, backend="X\0"), "backends.X\\x00"),  # escaped in messages
    ],
)
def test_nul_bytes_are_refused(build: Callable[[], object], path: str) -> None:
    error = refused(build)
    assert error.path == path
    assert "contains a NUL byte, which the runtime's C strings cannot hold" in str(error)


def test_lone_surrogates_are_refused() -> None:
    error = refused(lambda: one("\ud800"))
    assert "not encodable as UTF-8" in str(error) and "remove lone surrogates" in str(error)


def test_a_key_twice_in_one_backend_is_refused_with_both_places() -> None:
    error = refused(lambda: OptionsMap.from_dict({"A": [("k", 1), ("j", 2), ("k", True)]}))
    assert str(error) == (
        "backends.A[2].key: backend 'A' has key 'k' twice (first at [0]); "
        "each key may appear once; got 'k'"
    )


def test_the_same_key_in_two_backends_is_fine() -> None:
    assert OptionsMap.from_dict({"A": {"k": 1}, "B": {"k": 2}})


def test_a_backend_twice_is_refused() -> None:
    error = refused(lambda: OptionsMap((BackendOptions("A"), BackendOptions("A"))))
    assert str(error) == "backends.A: backend 'A' appears twice; merge its options; got 'A'"


def test_the_error_points_at_the_option_index() -> None:
    error = refused(lambda: OptionsMap.from_dict({"A": [("a", 1), ("b", 2), ("c", 2**31)]}))
    assert error.path == "backends.A[2].value"


# ------------------------------------------------------------------------ unchecked maps


def test_unchecked_maps_hold_anything_and_compare_equal_to_checked_ones() -> None:
    wild = OptionsMap.unchecked(
        [
            BackendOptions(f"P{i}", (Option("k" * 70, 2**40), Option("k" * 70, "\0")))
            for i in range(12)
        ]
    )
    assert wild.checked is False and len(wild.backends) == 12
    with pytest.raises(MapValidationError):
        wild.validate()
    assert OptionsMap.unchecked(one(1).backends) == one(1)
    assert OptionsMap.from_dict({"A": {"k": 2**40}}, checked=False).checked is False


# ------------------------------------------------------------------ the public name


def test_harness_options_re_exports_every_public_name_of_the_model() -> None:
    """``harness.options`` (what users import) is :mod:`harness.data.options`, name for
    name: nothing defined twice, nothing left out."""
    import ast
    import inspect

    import harness.data.options as model
    import harness.options as public

    defined = set()
    for node in ast.parse(inspect.getsource(model)).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
    import harness.codec.mapfile as map_files
    from harness.data.strategies import options_maps

    lazy = {"options_maps"}  # imported on first use: it loads Hypothesis
    files = {"load_map", "MapFileError"}  # what users read map files with
    own = set(public.__all__) - lazy - files
    assert own == {name for name in defined if not name.startswith("_")}
    assert all(getattr(public, name) is getattr(model, name) for name in own)
    assert all(getattr(public, name) is getattr(map_files, name) for name in files)
    assert public.options_maps is options_maps


def test_generated_maps_hold_multi_byte_text_and_stay_within_the_byte_limits() -> None:
    """``options_maps`` cuts over-long text at a character boundary (it does not filter it
    out): long multi-byte keys and strings come, and never over 63 and 255 bytes."""
    from hypothesis import Phase, given, settings

    from harness.data.strategies import options_maps

    longest = {MAX_KEY_BYTES: 0, MAX_STRING_BYTES: 0}  # of multi-byte text, in bytes

    @settings(max_examples=300, database=None, derandomize=True, phases=[Phase.generate])
    @given(options_maps(backend_ids=("A", "B")))
    def within(options: OptionsMap) -> None:
        for option in (o for b in options.backends for o in b.options):
            for limit, text in ((MAX_KEY_BYTES, option.key), (MAX_STRING_BYTES, option.value)):
                if isinstance(text, str):
                    assert len(text.encode()) <= limit, (limit, text)
                    if len(text.encode()) > len(text):
                        longest[limit] = max(longest[limit], len(text.encode()))

    within()
    assert longest[MAX_KEY_BYTES] >= 60 and longest[MAX_STRING_BYTES] >= 32, longest
