"""A real backend: XnnpackBackend from the executorch wheel, globally and at load time.

The keys, types and ranges come from the harness's contract for XnnpackBackend
(``CONTRACTS``, harness/check/option_contracts.py, which names a user's options that
will have no effect); this suite pins it. Global path (``set_option``/``get_option``),
executorch 1.5.1 as observed: keys ``workspace_sharing_mode`` (int 0..2, default 2),
``weight_cache_enabled`` (bool, default false), ``packed_cache_path`` (string, default
""), ``save_weight_cache_on_disk`` (bool, set only). A wrong type or an out-of-range value
gives InvalidArgument; unknown keys are ignored with Ok. Its state is process-global and
survives RESET, so every test sets what it reads.

Load time, on every load path the device announces: the XNNPACK program
(harness/programs/xnnpack.py: a real fully connected layer with a constant weight, no
torch) loads and executes in the real runtime. What
XnnpackBackend makes of its own runtime specs is shown from outside the backend:

- an out-of-range ``workspace_sharing_mode`` spec fails its ``init`` (InvalidArgument);
- ``weight_cache_enabled`` with ``packed_cache_path`` makes the weight cache create its
  file there; the global ``packed_cache_path`` is never used for that (upstream's fix
  for a path leaking into another model's init);
- a wrong-typed ``weight_cache_enabled`` spec falls back to the global value, silently;

and each effect is absent when the same keys sit in another backend's entry, while
the global ``get_option`` values stay what they were.
"""

from __future__ import annotations

import posixpath
import uuid

import pytest

from harness.check import CONTRACTS, LoadPath, Outcome, Request, Route, RuntimeErrorCode
from harness.options import Option, OptionsMap
from harness.runner import xnnpack_output

from .maps import single

pytestmark = pytest.mark.backend("XnnpackBackend")

XNNPACK = "XnnpackBackend"
CONTRACT = CONTRACTS[XNNPACK]
MODE = CONTRACT.rule("workspace_sharing_mode")
assert MODE.low is not None and MODE.high is not None  # the contract bounds the mode
MODE_LOW, MODE_HIGH = MODE.low, MODE.high
GLOBAL_KEYS = (
    Option("workspace_sharing_mode", -1),
    Option("weight_cache_enabled", True),
    Option("packed_cache_path", "placeholder"),
)

# ---- global set_option / get_option ------------------------------------------------------


@pytest.mark.parametrize("mode", range(MODE_LOW, MODE_HIGH + 1), ids=lambda m: f"mode-{m}")
def test_workspace_sharing_mode_is_set_and_read_back(et, mode):
    et.set(single(XNNPACK, Option("workspace_sharing_mode", mode))).raise_for_differences()
    et.get(
        single(XNNPACK, Option("workspace_sharing_mode", -1)),
        expected=single(XNNPACK, Option("workspace_sharing_mode", mode)),
    ).raise_for_differences()


@pytest.mark.parametrize("enabled", [True, False])
def test_weight_cache_enabled_is_set_and_read_back(et, enabled):
    et.set(single(XNNPACK, Option("weight_cache_enabled", enabled))).raise_for_differences()
    et.get(
        single(XNNPACK, Option("weight_cache_enabled", not enabled)),
        expected=single(XNNPACK, Option("weight_cache_enabled", enabled)),
    ).raise_for_differences()


@pytest.mark.parametrize("path", ["/tmp/et-harness/xnnpack-cache", ""])
def test_packed_cache_path_is_set_and_read_back(et, path):
    et.set(single(XNNPACK, Option("packed_cache_path", path))).raise_for_differences()
    et.get(
        single(XNNPACK, Option("packed_cache_path", "placeholder")),
        expected=single(XNNPACK, Option("packed_cache_path", path)),
    ).raise_for_differences()


def test_get_before_any_set_reads_the_defaults(et):
    et.restart()  # a fresh process: nothing set yet
    defaults = single(
        XNNPACK,
        Option("workspace_sharing_mode", 2),
        Option("weight_cache_enabled", False),
        Option("packed_cache_path", ""),
    )
    et.get(single(XNNPACK, *GLOBAL_KEYS), expected=defaults).raise_for_differences()


@pytest.mark.options_without_effect
def test_save_weight_cache_on_disk_is_accepted_as_a_bool(et):
    et.set(single(XNNPACK, Option("save_weight_cache_on_disk", True))).raise_for_differences()
    et.set(
        single(XNNPACK, Option("save_weight_cache_on_disk", 1)),
        expected_status={XNNPACK: RuntimeErrorCode.InvalidArgument},
    ).raise_for_differences()


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "XnnpackBackend 1.5.1 validates and stores save_weight_cache_on_disk in set_option, but "
        "its get_option does not read it back: the placeholder comes back untouched"
    ),
)
def test_save_weight_cache_on_disk_is_read_back(et):
    et.set(single(XNNPACK, Option("save_weight_cache_on_disk", True))).raise_for_differences()
    et.get(
        single(XNNPACK, Option("save_weight_cache_on_disk", False)),
        expected=single(XNNPACK, Option("save_weight_cache_on_disk", True)),
    ).raise_for_differences()


WRONG = {
    "mode-as-bool": Option("workspace_sharing_mode", True),
    "mode-as-string": Option("workspace_sharing_mode", "1"),
    "mode-above-range": Option("workspace_sharing_mode", MODE_HIGH + 1),
    "mode-below-range": Option("workspace_sharing_mode", MODE_LOW - 1),
    "weight-cache-as-int": Option("weight_cache_enabled", 1),
    "cache-path-as-int": Option("packed_cache_path", 5),
}


@pytest.mark.parametrize("option", WRONG.values(), ids=WRONG.keys())
@pytest.mark.options_without_effect
def test_wrong_type_or_range_gives_invalid_argument(et, option):
    et.set(single(XNNPACK, Option("workspace_sharing_mode", 1))).raise_for_differences()
    et.set(
        single(XNNPACK, option), expected_status={XNNPACK: RuntimeErrorCode.InvalidArgument}
    ).raise_for_differences()
    if option.key == "workspace_sharing_mode":  # the refused value was not stored
        et.get(
            single(XNNPACK, Option("workspace_sharing_mode", -1)),
            expected=single(XNNPACK, Option("workspace_sharing_mode", 1)),
        ).raise_for_differences()


# XNNPACK's defaults for its keys' types: the process-global state is left as a fresh
# process has it (later loads in this process see no weight cache switched on).
A_VALUE: dict[type, bool | int | str] = {bool: False, int: 2, str: ""}


@pytest.mark.parametrize("key", CONTRACT.keys(Route.SET))
@pytest.mark.options_without_effect
def test_every_key_of_the_contract_takes_its_type_and_refuses_another(et, key):
    """The contract's keys and types, as set_option takes them: a value of the key's type
    is Ok, one of another type InvalidArgument (what the contract says XNNPACK does)."""
    rule = CONTRACT.rule(key)
    et.set(single(XNNPACK, Option(key, A_VALUE[rule.type]))).raise_for_differences()
    other = next(value for kind, value in A_VALUE.items() if kind is not rule.type)
    et.set(
        single(XNNPACK, Option(key, other)),
        expected_status={XNNPACK: RuntimeErrorCode.InvalidArgument},
    ).raise_for_differences()


@pytest.mark.options_without_effect
def test_a_refused_key_does_not_stop_the_others_of_its_call(et):
    """Observed: every valid key of the call is applied; the call returns InvalidArgument."""
    et.set(single(XNNPACK, Option("workspace_sharing_mode", 2))).raise_for_differences()
    et.set(
        single(XNNPACK, Option("weight_cache_enabled", 3), Option("workspace_sharing_mode", 0)),
        expected_status={XNNPACK: RuntimeErrorCode.InvalidArgument},
    ).raise_for_differences()
    et.get(
        single(XNNPACK, Option("workspace_sharing_mode", -1)),
        expected=single(XNNPACK, Option("workspace_sharing_mode", 0)),
    ).raise_for_differences()


@pytest.mark.options_without_effect
def test_unknown_key_is_ignored_with_ok(et):
    et.set(single(XNNPACK, Option("no_such_xnnpack_option", 1))).raise_for_differences()
    untouched = single(XNNPACK, Option("no_such_xnnpack_option", 123))
    et.get(untouched, expected=untouched).raise_for_differences()


def test_values_persist_across_cases_and_loads(et):
    stored = single(
        XNNPACK,
        Option("workspace_sharing_mode", 0),
        Option("weight_cache_enabled", False),
        Option("packed_cache_path", "/p/q"),
    )
    et.set(stored).raise_for_differences()
    et.reset()  # the boundary between two cases
    et.load(OptionsMap(), delegates=(XNNPACK,), unobserved=(XNNPACK,)).raise_for_differences()
    et.get(single(XNNPACK, *GLOBAL_KEYS), expected=stored).raise_for_differences()


# ---- load time: the XNNPACK program ------------------------------------------------------


def load_xnnpack(et, path: LoadPath, options: OptionsMap, probes: tuple[str, ...] = ()):
    """LOAD the XNNPACK program through ``path`` (``probes`` first); the verdict.

    On ``module_both`` ``options`` is the explicit map and the stored one is empty, so
    the backends get exactly ``options`` on every path.
    """
    stored = OptionsMap() if path is LoadPath.MODULE_BOTH else None
    return et.load(
        options, delegates=(*probes, XNNPACK), unobserved=(XNNPACK,), path=path, stored=stored
    )


def load_failing(et, probe_program, path: LoadPath, options: OptionsMap):
    """LOAD the XNNPACK program expecting it to fail: the raw report, no delivery verdict."""
    program = probe_program((XNNPACK,))
    if path is LoadPath.MODULE_BOTH:
        request = Request.load(program, (XNNPACK,), OptionsMap(), path=path, method_options=options)
    else:
        request = Request.load(program, (XNNPACK,), options, path=path)
    return et.send(request)


def cache_file(device) -> str:
    """A fresh path in the device's work directory for XNNPACK's packed weight file."""
    return posixpath.join(device.work_dir, f"xnnpack-cache-{uuid.uuid4().hex[:12]}.bin")


def exists(device, path: str) -> bool:
    return device.transport.sha256(path) is not None


def set_global(et, **values) -> None:
    options = tuple(Option(key, value) for key, value in values.items())
    et.set(single(XNNPACK, *options)).raise_for_differences()


def test_xnnpack_program_loads_and_computes(et, load_path):
    verdict = load_xnnpack(et, load_path, OptionsMap())
    verdict.raise_for_differences()
    entry = verdict.report.entry(XNNPACK)
    assert entry is not None and entry.status == RuntimeErrorCode.Ok and not entry.is_probe
    assert verdict.report.fact("outputs") == xnnpack_output()  # W @ x + b, by XNNPACK
    again = et.execute()
    assert again.outcome is Outcome.OK and again.fact("outputs") == xnnpack_output()


@pytest.mark.parametrize("mode", [0, 1, 2], ids=lambda m: f"mode-{m}")
def test_own_workspace_sharing_mode_in_range_loads(et, load_path, mode):
    options = single(XNNPACK, Option("workspace_sharing_mode", mode))
    verdict = load_xnnpack(et, load_path, options)
    verdict.raise_for_differences()
    assert verdict.report.fact("outputs") == xnnpack_output()


@pytest.mark.parametrize("mode", [3, -1, 1000], ids=lambda m: f"mode-{m}")
def test_own_out_of_range_workspace_sharing_mode_fails_init(et, load_path, probe_program, mode):
    options = single(XNNPACK, Option("workspace_sharing_mode", mode))
    report = load_failing(et, probe_program, load_path, options)
    assert (report.outcome, report.detail) == (
        Outcome.RUNTIME_ERROR,
        RuntimeErrorCode.InvalidArgument,
    )
    entry = report.entry(XNNPACK)
    assert entry is not None and entry.status == RuntimeErrorCode.InvalidArgument


@pytest.mark.options_without_effect
def test_out_of_range_mode_in_another_backends_entry_has_no_effect(et, load_path):
    options = OptionsMap.from_dict(
        {"ProbeA": {"workspace_sharing_mode": 3}, "OpenvinoBackend": {"workspace_sharing_mode": 3}}
    )
    verdict = load_xnnpack(et, load_path, options, probes=("ProbeA",))
    verdict.raise_for_differences()  # ProbeA got exactly its entry; XNNPACK initialised
    assert verdict.report.entry(XNNPACK).status == RuntimeErrorCode.Ok
    assert verdict.report.fact("outputs") == xnnpack_output()


def test_load_time_specs_leave_the_global_values_alone(et, load_path, probe_program):
    set_global(et, workspace_sharing_mode=1, weight_cache_enabled=False, packed_cache_path="/g")
    before = single(
        XNNPACK,
        Option("workspace_sharing_mode", 1),
        Option("weight_cache_enabled", False),
        Option("packed_cache_path", "/g"),
    )
    load_xnnpack(
        et,
        load_path,
        single(
            XNNPACK,
            Option("workspace_sharing_mode", 0),
            Option("weight_cache_enabled", True),
            Option("packed_cache_path", "/spec"),
        ),
    ).raise_for_differences()
    failed = load_failing(
        et, probe_program, load_path, single(XNNPACK, Option("workspace_sharing_mode", 9))
    )
    assert failed.outcome is Outcome.RUNTIME_ERROR
    et.get(single(XNNPACK, *GLOBAL_KEYS), expected=before).raise_for_differences()


def test_own_weight_cache_specs_create_the_cache_file(et, load_path, device):
    set_global(et, weight_cache_enabled=False)
    path = cache_file(device)
    load_xnnpack(
        et,
        load_path,
        single(XNNPACK, Option("weight_cache_enabled", True), Option("packed_cache_path", path)),
    ).raise_for_differences()
    assert exists(device, path), f"XnnpackBackend's weight cache did not create {path}"


def test_weight_cache_specs_in_a_probes_entry_create_nothing(et, load_path, device):
    set_global(et, weight_cache_enabled=False)
    path = cache_file(device)
    options = OptionsMap.from_dict(
        {"ProbeA": {"weight_cache_enabled": True, "packed_cache_path": path}}
    )
    load_xnnpack(et, load_path, options, probes=("ProbeA",)).raise_for_differences()
    assert not exists(device, path)


def test_global_packed_cache_path_is_not_used_at_init(et, load_path, device):
    path = cache_file(device)
    set_global(et, weight_cache_enabled=True, packed_cache_path=path)
    load_xnnpack(et, load_path, OptionsMap()).raise_for_differences()
    assert not exists(device, path), "init used the global packed_cache_path"
    set_global(et, weight_cache_enabled=False, packed_cache_path="")


def test_own_cache_path_with_the_global_switch_on_creates_the_file(et, load_path, device):
    set_global(et, weight_cache_enabled=True)
    path = cache_file(device)
    options = single(XNNPACK, Option("packed_cache_path", path))
    load_xnnpack(et, load_path, options).raise_for_differences()
    assert exists(device, path)
    set_global(et, weight_cache_enabled=False)


@pytest.mark.parametrize("global_switch", [False, True], ids=["global-off", "global-on"])
@pytest.mark.options_without_effect
def test_wrong_typed_weight_cache_spec_falls_back_to_the_global_value(
    et, load_path, device, global_switch
):
    set_global(et, weight_cache_enabled=global_switch)
    path = cache_file(device)
    verdict = load_xnnpack(
        et,
        load_path,
        single(XNNPACK, Option("weight_cache_enabled", 1), Option("packed_cache_path", path)),
    )
    verdict.raise_for_differences()  # silently: init succeeds
    assert exists(device, path) is global_switch
    set_global(et, weight_cache_enabled=False)
