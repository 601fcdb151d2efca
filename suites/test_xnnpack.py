"""A real backend: XnnpackBackend from the executorch wheel, through set_option/get_option.

Its documented keys (executorch 1.5.x): ``workspace_sharing_mode`` (int 0..2),
``weight_cache_enabled`` (bool), ``packed_cache_path`` (string). A wrong type or an
out-of-range value gives InvalidArgument; unknown keys are ignored with Ok. Its
state is process-global and survives RESET, so every test sets what it reads.
"""

from __future__ import annotations

import pytest
from maps import single

from harness.options import Option
from harness.runtime_error import RuntimeErrorCode

pytestmark = pytest.mark.backend("XnnpackBackend")

XNNPACK = "XnnpackBackend"


@pytest.mark.parametrize("mode", [0, 1, 2], ids=lambda m: f"mode-{m}")
def test_workspace_sharing_mode_is_set_and_read_back(et, mode):
    et.set(single(XNNPACK, Option("workspace_sharing_mode", mode))).raise_for_differences()
    et.get(single(XNNPACK, Option("workspace_sharing_mode", -1)),
           expected=single(XNNPACK, Option("workspace_sharing_mode", mode))).raise_for_differences()


@pytest.mark.parametrize("enabled", [True, False])
def test_weight_cache_enabled_is_set_and_read_back(et, enabled):
    et.set(single(XNNPACK, Option("weight_cache_enabled", enabled))).raise_for_differences()
    et.get(single(XNNPACK, Option("weight_cache_enabled", not enabled)),
           expected=single(XNNPACK, Option("weight_cache_enabled", enabled))).raise_for_differences()


@pytest.mark.parametrize("path", ["/tmp/et-harness/xnnpack-cache", ""])
def test_packed_cache_path_is_set_and_read_back(et, path):
    et.set(single(XNNPACK, Option("packed_cache_path", path))).raise_for_differences()
    et.get(single(XNNPACK, Option("packed_cache_path", "placeholder")),
           expected=single(XNNPACK, Option("packed_cache_path", path))).raise_for_differences()


WRONG = {
    "mode-as-bool": Option("workspace_sharing_mode", True),
    "mode-as-string": Option("workspace_sharing_mode", "1"),
    "mode-above-range": Option("workspace_sharing_mode", 3),
    "mode-below-range": Option("workspace_sharing_mode", -1),
    "weight-cache-as-int": Option("weight_cache_enabled", 1),
    "cache-path-as-int": Option("packed_cache_path", 5),
}


@pytest.mark.parametrize("option", WRONG.values(), ids=WRONG.keys())
def test_wrong_type_or_range_gives_invalid_argument(et, option):
    et.set(single(XNNPACK, Option("workspace_sharing_mode", 1))).raise_for_differences()
    et.set(single(XNNPACK, option),
           expected_status={XNNPACK: RuntimeErrorCode.InvalidArgument}).raise_for_differences()


def test_unknown_key_is_ignored_with_ok(et):
    et.set(single(XNNPACK, Option("no_such_xnnpack_option", 1))).raise_for_differences()
    untouched = single(XNNPACK, Option("no_such_xnnpack_option", 123))
    et.get(untouched, expected=untouched).raise_for_differences()
