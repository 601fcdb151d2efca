"""What each backend the harness knows does with its options (its option contract), and
the options of a map that will have no effect there.

The runtime delivers a map exactly and the backends accept what they do not use without
a word: a misspelled key, a value of the wrong type, an option given at load time to a
backend that reads none then. Delivery is exact; the user's option changed nothing. The
harness knows the contracts of the backends it ships suites for (:data:`CONTRACTS`), and a
user declares their own backend's (:func:`declare_contract`, or a contract file:
:mod:`harness.check.contract_files`), so it names those: :func:`judge_options` returns an
:class:`OptionWarning` for each. :func:`heed_options` is the one judgement every door makes
before a map travels (``et.load``/``set``/``get``/``check_program``, ``et-harness send``
and ``map``): each a :class:`NoEffectWarning`, and with ``--strict-options``
(``strict=True``) :class:`OptionsWithoutEffect`, nothing sent. A backend without a
contract stays unjudged.

Each contract lives here once, and the suites that pin the backend's behaviour take its
keys, types and ranges from it (``suites/test_xnnpack.py``, ``test_qnn.py``,
``test_openvino.py``), so a contract that drifted from the backend fails there. The
probes (``agent/runtime/src/probe_backend.cpp``) take any option on every route.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import sys
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import harness
from harness.check.wording import format_value, show_name
from harness.data.effects import RESULT_INVARIANT, Changes, DeclaredEffect, OptionEffect
from harness.data.options import OptionsMap, OptionValue
from harness.errors import CheckFailure, UsageError


class Route(enum.Enum):
    """How an option reaches a backend."""

    LOAD = "at load time"  # the LoadBackendOptionsMap: init's runtime_specs
    SET = "through set_option"  # the global set_option(backend, options)
    GET = "through get_option"  # the global get_option: answers for set_option's keys


class NoEffect(enum.Enum):
    """Why an option will have no effect (or not the one meant)."""

    UNKNOWN_BACKEND = "unknown backend id"
    UNKNOWN_KEY = "unknown key"
    WRONG_TYPE = "wrong type"
    OUT_OF_RANGE = "out of range"
    NOT_READ = "not read on this route"


@dataclass(frozen=True)
class OptionRule:
    """One option a backend reads: its key, type, range (ints), routes and what it may
    change (:class:`~harness.data.effects.OptionEffect`: result-invariant unless said)."""

    key: str
    type: type[bool] | type[int] | type[str]
    low: int | None = None
    high: int | None = None
    routes: frozenset[Route] = frozenset({Route.LOAD, Route.SET})  # a GET: as SET
    effect: OptionEffect = RESULT_INVARIANT

    def describe(self) -> str:
        """``an int 0..2``, ``a bool``, ``a string``."""
        if self.type is bool:
            return "a bool"
        if self.type is str:
            return "a string"
        bounds = f" {self.low}..{self.high}" if self.low is not None else ""
        return f"an int{bounds}"

    def in_range(self, value: int) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass(frozen=True)
class RouteBehaviour:
    """What a backend does, on one route, with an option it cannot use."""

    unknown_key: str
    wrong_type: str
    out_of_range: str = ""


@dataclass(frozen=True)
class BackendContract:
    """A backend's options and what it does with the others, per route (None: it reads
    no options on that route; ``get_option`` answers for ``set_option``'s keys);
    ``pinned_by`` is the suite that checks it on devices, or the contract file."""

    backend: str
    options: tuple[OptionRule, ...]
    load: RouteBehaviour | None
    set: RouteBehaviour | None
    pinned_by: str = ""
    any_option: bool = False  # the probes: every key, every type, every route
    _by_key: dict[str, OptionRule] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_key", {rule.key: rule for rule in self.options})

    def rule(self, key: str) -> OptionRule:
        """The rule of ``key``; KeyError naming the known keys otherwise."""
        try:
            return self._by_key[key]
        except KeyError:
            raise KeyError(f"{self.backend} has no option {key!r}; known: {self.keys()}") from None

    def find(self, key: str) -> OptionRule | None:
        """The rule of ``key``, or None for a key the backend does not know."""
        return self._by_key.get(key)

    def keys(self, route: Route | None = None, of_type: type | None = None) -> tuple[str, ...]:
        """The keys read on ``route`` (any route if None), of type ``of_type`` if given."""
        return tuple(
            rule.key
            for rule in self.options
            if (route is None or self.reads(rule, route))
            and (of_type is None or rule.type is of_type)
        )

    def behaviour(self, route: Route) -> RouteBehaviour | None:
        return self.load if route is Route.LOAD else self.set

    def reads(self, rule: OptionRule, route: Route) -> bool:
        """Whether ``rule``'s option is read on ``route`` (a GET: where set_option reads it)."""
        return (Route.SET if route is Route.GET else route) in rule.routes


_NONE = "it will have no effect"
_NO_VALUE = "get_option has no value of that name to give back"
_KEPT = "the value set before stays"
_XNNPACK_REFUSES = f"set_option refuses it with InvalidArgument; {_KEPT}"
_QNN_INT_KEYS = (
    "qnn_runtime_log_level",
    "qnn_runtime_htp_performance_mode",
    "qnn_runtime_profile_level",
    "qnn_runtime_lpai_fps",
    "qnn_runtime_lpai_ftrt_ratio",
    "qnn_runtime_lpai_affinity",
    "qnn_runtime_lpai_client_perf_type",
    "qnn_runtime_lpai_core_selection",
)
_SET_ONLY = frozenset({Route.SET})
_CACHE_FILE = OptionEffect(Changes.FILE, when=(("weight_cache_enabled", True),))

CONTRACTS: dict[str, BackendContract] = {
    contract.backend: contract
    for contract in (
        BackendContract(
            "XnnpackBackend",
            (
                OptionRule("workspace_sharing_mode", int, 0, 2),
                OptionRule("weight_cache_enabled", bool),
                # Measured on 1.5.1: init writes the packed weights there when the
                # weight cache is on; it reads the path from its runtime specs only.
                OptionRule("packed_cache_path", str, effect=_CACHE_FILE),
                OptionRule("save_weight_cache_on_disk", bool, routes=_SET_ONLY),
            ),
            load=RouteBehaviour(
                unknown_key=f"init ignores it: {_NONE}",
                wrong_type="init ignores it and uses the global value (set_option's) instead",
                out_of_range="init fails with InvalidArgument: the method will not load",
            ),
            set=RouteBehaviour(
                unknown_key=f"set_option ignores it and returns Ok: {_NONE}",
                wrong_type=_XNNPACK_REFUSES,
                out_of_range=_XNNPACK_REFUSES,
            ),
            pinned_by="suites/test_xnnpack.py",
        ),
        BackendContract(
            "QnnBackend",
            (
                *(OptionRule(key, int, routes=_SET_ONLY) for key in _QNN_INT_KEYS),
                OptionRule("qnn_runtime_heap_profiling_path", str, routes=_SET_ONLY),
            ),
            load=None,
            set=RouteBehaviour(
                unknown_key="set_option returns Internal for it (the call's known keys apply)",
                wrong_type=f"set_option skips it and returns Ok; {_KEPT}",
            ),
            pinned_by="suites/test_qnn.py",
        ),
        BackendContract(
            "OpenvinoBackend", (), load=None, set=None, pinned_by="suites/test_openvino.py"
        ),
    )
}
"""The contracts of the backends the harness ships suites for (executorch 1.5.1). Every
option is result-invariant (caches, workspaces, threads, performance and log settings)
except XNNPACK's ``packed_cache_path``, which also leaves a file at load time."""

PROBE_CONTRACT = BackendContract(
    "probe",
    (),
    load=RouteBehaviour("", ""),
    set=RouteBehaviour("", ""),
    pinned_by="suites/test_limits.py",
    any_option=True,
)
"""The harness's probes: they record whatever they are given, on every route."""

PROBE_PREFIX = "Probe"
"""Names beginning with it are the harness's probes (``ProbeA`` .. ``ProbeH`` in the
suites): registered on a device that lacks them without being declared."""

_DECLARED: dict[str, BackendContract] = {}  # the user's own backends, by id


class ContractError(UsageError):
    """A contract that cannot be declared (an id with a contract already); the message
    says what to change."""


def declare_contract(contract: BackendContract) -> None:
    """Declare the option contract of a backend of one's own (e.g. in a ``conftest.py``):
    every door judges its options from then on, in this process. Declaring an equal
    contract again (from another file, say) does nothing; another one for the same id, or one
    for an id the harness knows (:data:`CONTRACTS`, a probe's), is a :class:`ContractError`."""
    name = contract.backend
    shipped = PROBE_CONTRACT if name.startswith(PROBE_PREFIX) else CONTRACTS.get(name)
    if shipped is not None:
        raise ContractError(
            f"{show_name(name)} has the harness's own contract (pinned by "
            f"{shipped.pinned_by}); a backend of your own declares its own id"
        )
    earlier = _DECLARED.setdefault(name, contract)
    if dataclasses.replace(earlier, pinned_by=contract.pinned_by) != contract:
        raise ContractError(
            f"{show_name(name)}: a second, different contract (from "
            f"{contract.pinned_by or 'code'}; the first from {earlier.pinned_by or 'code'}): "
            "declare each backend once"
        )


def contract_of(backend: str) -> BackendContract | None:
    """The contract judged for ``backend``: the harness's, or one declared; None if neither."""
    return CONTRACTS.get(backend) or _DECLARED.get(backend)


def known_contracts() -> Mapping[str, BackendContract]:
    """Every contract judged now: the harness's (:data:`CONTRACTS`), then those declared."""
    return {**CONTRACTS, **_DECLARED}


def judged_effects(
    options: OptionsMap,
    *,
    probes: Collection[str] = (),
    declared: Mapping[tuple[str, str], DeclaredEffect] | None = None,
) -> dict[tuple[str, str], OptionEffect]:
    """What each option of ``options`` may change, by (backend, key): a contract's rule
    says it, a probe's option is result-invariant unless the map declares otherwise, and
    the map's ``declared`` effects speak for options no contract knows. An option nothing
    speaks for is left out (unjudged). A declaration that contradicts a contract is a
    :class:`ContractError` naming the map's field."""
    said = declared or {}
    judged: dict[tuple[str, str], OptionEffect] = {}
    for entry in options.backends:
        name = entry.backend_id
        contract = None if name in probes else contract_of(name)
        for option in entry.options:
            here = (name, option.key)
            rule = contract.find(option.key) if contract is not None else None
            declaration = said.get(here)
            if rule is not None and declaration is not None and declaration.effect != rule.effect:
                raise ContractError(
                    f"{declaration.where}: {show_name(name)}'s contract declares "
                    f"{show_name(option.key)} {rule.effect.describe()}; leave "
                    "'effect' out of the map for this option"
                )
            if rule is not None:
                judged[here] = rule.effect
            elif declaration is not None:
                judged[here] = declaration.effect
            elif name in probes:
                judged[here] = RESULT_INVARIANT
    return judged


@dataclass(frozen=True)
class OptionWarning:
    """One option of a map that its backend will ignore (or refuse), and why."""

    backend: str
    key: str
    kind: NoEffect
    route: Route
    text: str

    def __str__(self) -> str:
        return self.text


class NoEffectWarning(UserWarning):
    """Python's warning for an :class:`OptionWarning` (pytest lists it in its summary)."""


class OptionsWithoutEffect(AssertionError, CheckFailure):
    """``--strict-options`` (``strict=True``): options that will have no effect fail."""

    def __init__(self, warnings: tuple[OptionWarning, ...]) -> None:
        self.warnings = warnings
        lines = "\n".join(f"  - {w.text}" for w in warnings)
        super().__init__(
            f"{len(warnings)} option{'' if len(warnings) == 1 else 's'} will have no effect "
            f"(--strict-options makes that a failure):\n{lines}"
        )


def heed_options(
    options: OptionsMap, route: Route, *, probes: Collection[str] = (), strict: bool = False
) -> tuple[OptionWarning, ...]:
    """The one judgement of a map before it travels ``route``, which every door makes:
    :func:`judge_options`, each warning a :class:`NoEffectWarning` (at the user's line,
    outside the harness), then, when ``strict`` (``--strict-options``),
    :class:`OptionsWithoutEffect` listing them, before anything is sent."""
    found = judge_options(options, route, probes=probes)
    level = _outside_the_harness()
    for warning in found:
        warnings.warn(NoEffectWarning(warning.text), stacklevel=level)
    if found and strict:
        raise OptionsWithoutEffect(found)
    return found


# The package's folder: a frame whose file is below it is the harness's own.
_HARNESS = str(Path(harness.__file__).resolve().parent)


def _outside_the_harness() -> int:
    """The ``stacklevel`` of the innermost caller outside the harness package."""
    level, frame = 2, sys._getframe(2)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_HARNESS):
        level, frame = level + 1, frame.f_back
    return level


def judge_options(
    options: OptionsMap, route: Route, *, probes: Collection[str] = ()
) -> tuple[OptionWarning, ...]:
    """What each known backend of ``options`` will ignore when the map travels ``route``;
    ``probes`` are backend ids served by the harness's probes. Backends without a
    contract are not judged, except an id a letter or two from a known one: a misspelled
    id reaches no backend, and the runtime says nothing of it. A GET is judged by its
    backend ids and keys: its values only say which type to read back."""
    found: list[OptionWarning] = []
    for entry in options.backends:
        name = entry.backend_id
        contract = PROBE_CONTRACT if name in probes else contract_of(name)
        if contract is None:
            if name in OTHER_BACKENDS:
                continue
            lowered = {known.lower(): known for known in known_contracts()}  # without case
            nearest = difflib.get_close_matches(name.lower(), lowered, n=1, cutoff=_MISSPELLED)
            if nearest:
                found.append(_misspelled(name, lowered[nearest[0]], len(entry.options), route))
            continue
        if contract.any_option:
            continue
        for option in entry.options:
            warning = _judge_option(contract, route, option.key, option.value)
            if warning is not None:
                found.append(warning)
    return tuple(found)


# difflib's ratio, ignoring case: xnnpackbakend to xnnpackbackend is 0.96.
_MISSPELLED = 0.85
# The ids of ExecuTorch's other delegates, never taken for a misspelling of one above
# (EnnBackend is 0.9 from QnnBackend).
OTHER_BACKENDS = frozenset(
    {
        "EnnBackend",
        "VulkanBackend",
        "CoreMLBackend",
        "MPSBackend",
        "EthosUBackend",
        "NeuropilotBackend",
        "VgfBackend",
        "CadenceBackend",
    }
)


def _misspelled(name: str, nearest: str, count: int, route: Route) -> OptionWarning:
    return OptionWarning(
        name,
        "",
        NoEffect.UNKNOWN_BACKEND,
        route,
        f"{show_name(name)}: no backend has this id (nearest: {show_name(nearest)}); its "
        f"{count} option{' reaches' if count == 1 else 's reach'} no backend",
    )


def _judge_option(
    contract: BackendContract, route: Route, key: str, value: OptionValue
) -> OptionWarning | None:
    name = contract.backend
    shown = f"{show_name(name)}: option {show_name(key)} ({format_value(value)})"
    behaviour = contract.behaviour(route)

    def warn(kind: NoEffect, why: str) -> OptionWarning:
        return OptionWarning(name, key, kind, route, f"{shown}: {why}")

    if behaviour is None:
        elsewhere = [r for r in Route if contract.behaviour(r) is not None]
        where = f" (only {elsewhere[0].value})" if elsewhere else ""
        return warn(
            NoEffect.NOT_READ, f"{show_name(name)} reads no options {route.value}{where}: {_NONE}"
        )
    rule = contract.find(key)
    if rule is None:
        nearest = difflib.get_close_matches(key, contract.keys(), n=1)
        known = f"its options: {', '.join(map(show_name, contract.keys()))}"
        hint = f" (nearest: {show_name(nearest[0])})" if nearest else f" ({known})"
        does = _NO_VALUE if route is Route.GET else behaviour.unknown_key
        return warn(NoEffect.UNKNOWN_KEY, f"not an option {show_name(name)} knows{hint}; {does}")
    if not contract.reads(rule, route):
        only = ", ".join(r.value for r in rule.routes)
        return warn(
            NoEffect.NOT_READ, f"{show_name(name)} reads it {only} only, not {route.value}: {_NONE}"
        )
    if route is Route.GET:
        return None
    if type(value) is not rule.type:
        reads = f"{show_name(name)} reads {rule.describe()}"
        return warn(NoEffect.WRONG_TYPE, f"{reads}; {behaviour.wrong_type}")
    if type(value) is int and not rule.in_range(value):
        return warn(
            NoEffect.OUT_OF_RANGE,
            f"{show_name(name)} reads {rule.describe()}; {behaviour.out_of_range}",
        )
    return None
