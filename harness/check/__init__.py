"""The exactness check: what the host sent against what each backend reported.

:func:`check_load`, :func:`check_set` and :func:`check_get` compare a request's
options map with the device's :class:`~harness.data.messages.Report` and return a
:class:`Verdict` that names every difference (:class:`DifferenceKind`). Options
are compared strictly: the same key, the same type (``True`` never equals ``1``),
the same value and the same order. ``verdict.raise_for_differences()`` raises
:class:`DeliveryMismatch`, whose message is :meth:`Verdict.render`: per backend,
the sent and received options aligned side by side, differing lines marked.

A verdict is examined when a test reads ``ok``, ``differences``, ``kinds()``,
``backend()`` or calls ``raise_for_differences()``; the ``et`` fixture fails a test that
leaves one with differences unexamined (:class:`VerdictNotExamined`, naming the call
that made it), and ``verdict.ignore_differences()`` is the explicit opt-out for a test of
a refusal that asserts on ``verdict.report`` alone.

With :mod:`harness.options` and :mod:`harness.runner` (the ``et`` fixture's types) this
is the interface suites use, so it also exports the vocabulary of the requests and
reports a verdict is about: :class:`Request`, :class:`Report`, :class:`Action`,
:class:`Outcome`, :class:`LoadPath`, the runtime's :class:`RuntimeErrorCode` and the
wire's :class:`WireErrorCode` (a REJECTED report's ``detail``).

Beside a verdict, :func:`judge_options` names the options of a map that the backend
will ignore, by the option contracts the harness knows (:data:`CONTRACTS`, the one place
the suites take them from) and those a user declares for a backend of their own
(:func:`declare_contract` in code, :func:`declare_contract_files` for the project's
``backends/*.yaml``): :class:`OptionWarning`. :func:`heed_options` is the judgement every
door makes before a map travels: a :class:`NoEffectWarning` each, a failure under
``--strict-options`` (:class:`OptionsWithoutEffect`). What the options did to a program's
outputs (``et.check_program``): each option says what it may change (an
:class:`OptionRule`'s :class:`OptionEffect`: :class:`Changes` nothing, numerics within a
tolerance, or a file at its path); :class:`OptionsChangedOutputs` when an option changed
an element beyond that, :class:`EffectNotObserved` when a declared file was not left,
:class:`OutputsOffReference` when the outputs are not the reference; what each option
did is an :class:`OptionOutcome`; each output is a :class:`TensorOutput`
(:func:`outputs_of` reads them).

``differences`` holds what differs (per difference and per backend), ``verdict`` a whole
report's verdict, ``comparison`` the checks, ``rendering`` the text (``wording`` how names
and values read), ``option_contracts`` the contracts, ``output_effects`` the judgment of
outputs.
"""

from harness.check.comparison import check_get, check_load, check_set
from harness.check.contract_files import ContractFileError, declare_contract_files
from harness.check.differences import (
    BackendOutcome,
    Difference,
    DifferenceKind,
    DifferenceValue,
    OptionRow,
)
from harness.check.option_contracts import (
    CONTRACTS,
    BackendContract,
    ContractError,
    NoEffect,
    NoEffectWarning,
    OptionRule,
    OptionsWithoutEffect,
    OptionWarning,
    Route,
    RouteBehaviour,
    declare_contract,
    heed_options,
    judge_options,
    known_contracts,
)
from harness.check.option_outcomes import OptionOutcome
from harness.check.output_effects import (
    EffectNotObserved,
    OptionsChangedOutputs,
    OutputsOffReference,
)
from harness.check.verdict import DeliveryMismatch, Verdict, VerdictNotExamined
from harness.check.wording import format_value, show_name
from harness.codec.wire import WireErrorCode
from harness.data.effects import Changes, OptionEffect
from harness.data.messages import (
    MAX_MODELS,
    Action,
    LoadPath,
    LoadSpec,
    Outcome,
    Report,
    ReportEntry,
    Request,
)
from harness.data.outputs import TensorOutput, outputs_of
from harness.data.runtime_error import RuntimeErrorCode

__all__ = [
    "CONTRACTS",
    "MAX_MODELS",
    "Action",
    "BackendContract",
    "BackendOutcome",
    "Changes",
    "ContractError",
    "ContractFileError",
    "DeliveryMismatch",
    "Difference",
    "DifferenceKind",
    "DifferenceValue",
    "EffectNotObserved",
    "LoadPath",
    "LoadSpec",
    "NoEffect",
    "NoEffectWarning",
    "OptionEffect",
    "OptionOutcome",
    "OptionRow",
    "OptionRule",
    "OptionWarning",
    "OptionsChangedOutputs",
    "OptionsWithoutEffect",
    "Outcome",
    "OutputsOffReference",
    "Report",
    "ReportEntry",
    "Request",
    "Route",
    "RouteBehaviour",
    "RuntimeErrorCode",
    "TensorOutput",
    "Verdict",
    "VerdictNotExamined",
    "WireErrorCode",
    "check_get",
    "check_load",
    "check_set",
    "declare_contract",
    "declare_contract_files",
    "format_value",
    "heed_options",
    "judge_options",
    "known_contracts",
    "outputs_of",
    "show_name",
]
