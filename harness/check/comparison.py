"""The checks: a LOAD, SET or GET report against what was sent, as a :class:`Verdict`.

Options are compared strictly: the same key, the same type (``True`` never equals
``1``), the same value and the same order. Each sent option is paired with the
received option of the same key, so that every difference is named once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

from harness.check.differences import HOOKS, BackendOutcome, Difference, DifferenceKind, OptionRow
from harness.check.verdict import Verdict
from harness.codec.wire import WireErrorCode
from harness.data.messages import Action, LoadPath, Outcome, Report, ReportEntry
from harness.data.options import BackendOptions, Option, OptionsMap
from harness.data.runtime_error import RuntimeErrorCode, describe_status


def check_load(
    sent: OptionsMap,
    delegates: Sequence[str],
    report: Report,
    *,
    unobserved: Collection[str] = (),
    path: LoadPath = LoadPath.PROGRAM,
    recorded: Collection[str] = (),
    absent: Collection[str] = (),
) -> Verdict:
    """Check a LOAD report: each delegate's ``init`` got exactly its map entry.

    ``sent`` is the map the delegates must receive (on ``module_both`` the explicit
    one: it replaces the stored map wholly). ``delegates`` are the method's delegate
    ids in program order (duplicates mean one backend is called twice: ``init`` must
    run that often). A delegate with no map entry must receive an empty span.
    ``unobserved`` names delegates served by backends that are not probes, which
    report nothing on LOAD; if they do report, their status is checked. ``path`` is
    the load path asked for; a report naming another (fact ``load_path``) differs.
    ``recorded`` names the real backends the device records (HELLO fact ``recorded``):
    their entries must carry the records, which are then checked like a probe's.
    ``absent`` names backends of ``sent`` that were meant to be checked but that the device
    has none of (so they are no delegates): each is a ``NO_SUCH_BACKEND`` difference.
    """
    strays = [name for name in unobserved if name not in delegates]
    if strays:
        raise ValueError(
            f"unobserved names {strays}, which are not delegates of the program "
            f"{list(delegates)}; fix the test's expectations"
        )
    header = _header_differences(report, Action.LOAD)
    ignored = tuple(b for b in sent.backend_ids if b not in delegates and b not in absent)
    lacking = tuple(_no_such_backend(n, Action.LOAD) for n in absent if n not in delegates)
    if header:
        return Verdict(Action.LOAD, report, lacking, header, ignored, path)
    served = report.fact("load_path")
    if served is not None and served != path.label:
        header = (Difference(DifferenceKind.WRONG_PATH, None, None, path.label, served),)

    def why(name: str) -> str:
        if sent.for_backend(name) is not None:
            return "it is in the map, not a delegate of the program: its init should never run"
        return "it is not a delegate of the program"

    entries, entry_differences = _index_entries(report, set(delegates), why)
    outcomes = [
        _delegate_outcome(
            name, entries.get(name), delegates.count(name), sent, unobserved, recorded
        )
        for name in dict.fromkeys(delegates)
    ]
    outcomes += lacking
    return Verdict(Action.LOAD, report, tuple(outcomes), header + entry_differences, ignored, path)


def _delegate_outcome(
    name: str,
    entry: ReportEntry | None,
    calls: int,
    sent: OptionsMap,
    unobserved: Collection[str],
    recorded: Collection[str],
) -> BackendOutcome:
    """What delegate ``name`` (``calls`` times in the program) got at load: its entry
    checked against its map entry, NOT_CALLED without one, nothing for an unobserved one."""
    if entry is None and name in unobserved and name not in recorded:
        return BackendOutcome(name, None, RuntimeErrorCode.Ok, None, None)
    if entry is None:
        missing = Difference(DifferenceKind.NOT_CALLED, name, "init", calls, 0)
        return BackendOutcome(name, None, RuntimeErrorCode.Ok, calls, None, (), (missing,))
    wanted = sent.for_backend(name)
    return _check_entry(
        name,
        entry,
        Action.LOAD,
        expected=wanted.options if wanted is not None else (),
        expected_status=RuntimeErrorCode.Ok,
        expected_calls=calls,
        sent=sent,
        must_record=name in recorded,
    )


def _no_such_backend(
    name: str, action: Action, entry: ReportEntry | None = None, status: int = RuntimeErrorCode.Ok
) -> BackendOutcome:
    """A backend the device has none of, which was meant to be checked (to return
    ``status``): on SET and GET its entry holds the runtime's ``NotFound``, on LOAD there
    is none (no delegate: the runtime ignores its entry of the map)."""
    found = None if entry is None else entry.status
    expected = None if entry is None else status
    difference = Difference(DifferenceKind.NO_SUCH_BACKEND, name, HOOKS[action], expected, found)
    return BackendOutcome(name, entry, status, None, None, (), (difference,), absent=True)


def check_set(
    sent: OptionsMap,
    report: Report,
    expected_status: Mapping[str, int] | None = None,
    *,
    recorded: Collection[str] = (),
    absent: Collection[str] = (),
) -> Verdict:
    """Check a SET report: one entry per backend, each probe (and each backend named
    in ``recorded``, see :func:`check_load`) got exactly its options.

    ``expected_status`` gives the ``Error`` code expected for some backends (e.g.
    ``{"Unregistered": RuntimeErrorCode.NotFound}``); the others must return Ok.
    ``absent`` names backends the device has none of: the runtime's ``NotFound`` for one
    is a ``NO_SUCH_BACKEND`` difference, unless expected.
    """
    return _check_calls(
        Action.SET, sent, report, expected_status or {}, lambda _: None, recorded, absent
    )


def check_get(
    requested: OptionsMap,
    report: Report,
    expected: OptionsMap | None = None,
    expected_status: Mapping[str, int] | None = None,
    *,
    recorded: Collection[str] = (),
    absent: Collection[str] = (),
) -> Verdict:
    """Check a GET report against the values each backend should have filled in.

    For a backend in ``expected`` the returned span must equal its entry there (for
    any entry, probe or not: the span as the call left it is what the host reads).
    For the others only probes are compared, with ``requested``, by key, type and
    order but not value (the values sent are placeholders); a backend named in
    ``recorded`` is compared like a probe; ``absent`` as for :func:`check_set`.
    """
    expected = expected or OptionsMap()
    strays = [b for b in expected.backend_ids if requested.for_backend(b) is None]
    if strays:
        raise ValueError(
            f"expected values for {strays}, which are not in the requested map "
            f"{list(requested.backend_ids)}; add them to the request or drop them"
        )
    return _check_calls(
        Action.GET,
        requested,
        report,
        expected_status or {},
        expected.for_backend,
        recorded,
        absent,
    )


def _check_calls(
    action: Action,
    sent: OptionsMap,
    report: Report,
    expected_status: Mapping[str, int],
    expected_for: Callable[[str], BackendOptions | None],
    recorded: Collection[str],
    absent: Collection[str],
) -> Verdict:
    """SET and GET: the runtime calls each backend of the request once, in order."""
    strays = [name for name in expected_status if sent.for_backend(name) is None]
    if strays:
        raise ValueError(
            f"expected_status names {strays}, which are not in the request "
            f"{list(sent.backend_ids)}; fix the test's expectations"
        )
    header = _header_differences(report, action)
    if header:
        return Verdict(action, report, (), header)
    entries, entry_differences = _index_entries(
        report, set(sent.backend_ids), lambda _: "it is not a backend of the request"
    )
    outcomes = []
    for backend in sent.backends:
        name = backend.backend_id
        status = expected_status.get(name, RuntimeErrorCode.Ok)
        entry = entries.get(name)
        if entry is None:
            missing = Difference(DifferenceKind.MISSING_ENTRY, name)
            outcomes.append(BackendOutcome(name, None, status, None, None, (), (missing,)))
            continue
        if name in absent and entry.status == RuntimeErrorCode.NotFound:
            if status != RuntimeErrorCode.NotFound:
                outcomes.append(_no_such_backend(name, action, entry, status))
                continue
            outcomes.append(BackendOutcome(name, entry, status, None, None, absent=True))
            continue
        explicit = expected_for(name)
        outcomes.append(
            _check_entry(
                name,
                entry,
                action,
                expected=explicit.options if explicit is not None else backend.options,
                expected_status=status,
                expected_calls=1,
                sent=sent,
                values_checked=action is not Action.GET or explicit is not None,
                compare_non_probe=explicit is not None,
                must_record=name in recorded,
            )
        )
    return Verdict(action, report, tuple(outcomes), entry_differences)


def _header_differences(report: Report, action: Action) -> tuple[Difference, ...]:
    if report.action is not action:
        return (Difference(DifferenceKind.WRONG_ACTION, None, None, action, report.action),)
    if report.outcome is not Outcome.OK:
        detail = f"detail {_describe_detail(report.outcome, report.detail)}"
        message = f"message {report.message!r}" if report.message else "no message"
        return (
            Difference(
                DifferenceKind.UNEXPECTED_OUTCOME,
                None,
                None,
                Outcome.OK,
                report.outcome,
                note=f"{detail}, {message}",
            ),
        )
    return ()


def _describe_detail(outcome: Outcome, detail: int) -> str:
    """A report's detail by name: an ExecuTorch ``Error`` or a wire-format error code."""
    if outcome is Outcome.RUNTIME_ERROR:
        return describe_status(detail)
    if outcome is Outcome.REJECTED:
        try:
            return f"{WireErrorCode(detail).name} ({detail}, a wire error)"
        except ValueError:
            return f"{detail} (unknown wire error)"
    return str(detail)


def _index_entries(
    report: Report, allowed: Collection[str], why: Callable[[str], str]
) -> tuple[dict[str, ReportEntry], tuple[Difference, ...]]:
    """The first entry of each expected name, and differences for the others."""
    first: dict[str, ReportEntry] = {}
    differences: list[Difference] = []
    for entry in report.entries:
        if entry.name not in allowed:
            if not any(d.backend == entry.name for d in differences):
                differences.append(
                    Difference(
                        DifferenceKind.UNEXPECTED_ENTRY,
                        entry.name,
                        actual=entry,
                        note=why(entry.name),
                    )
                )
        else:
            first.setdefault(entry.name, entry)
    for name, count in Counter(e.name for e in report.entries).items():
        if count > 1:
            differences.append(Difference(DifferenceKind.DUPLICATE_ENTRY, name, None, 1, count))
    return first, tuple(differences)


def _check_entry(
    name: str,
    entry: ReportEntry,
    action: Action,
    *,
    expected: tuple[Option, ...],
    expected_status: int,
    expected_calls: int,
    sent: OptionsMap,
    values_checked: bool = True,
    compare_non_probe: bool = False,
    must_record: bool = False,
) -> BackendOutcome:
    differences = []
    if entry.status != expected_status:
        differences.append(
            Difference(DifferenceKind.WRONG_STATUS, name, None, expected_status, entry.status)
        )
    if must_record and not entry.is_observed:
        differences.append(Difference(DifferenceKind.NOT_RECORDED, name, actual=entry))
    if not entry.is_observed and not compare_non_probe:
        return BackendOutcome(name, entry, expected_status, None, None, (), tuple(differences))
    hook = HOOKS[action]
    if entry.is_observed and entry.calls == 0:
        differences.append(Difference(DifferenceKind.NOT_CALLED, name, hook, expected_calls, 0))
    elif entry.is_observed and entry.calls != expected_calls:
        differences.append(
            Difference(DifferenceKind.WRONG_CALL_COUNT, name, hook, expected_calls, entry.calls)
        )
    differences += _backend_status_differences(name, entry, action)
    others = tuple(b for b in sent.backends if b.backend_id != name)
    rows, option_differences = _align(
        name, expected, entry.delivered, others, values_checked, returned=action is Action.GET
    )
    if action is Action.GET and entry.is_recorded:
        option_differences += _caller_end(name, entry, expected, others, values_checked)
    return BackendOutcome(
        name,
        entry,
        expected_status,
        expected_calls if entry.is_observed else None,
        expected,
        rows,
        tuple(differences) + option_differences,
        values_checked,
    )


def _backend_status_differences(
    name: str, entry: ReportEntry, action: Action
) -> tuple[Difference, ...]:
    """A recorded real backend's own return code against what the runtime reported:
    SET and GET pass it on as it is; a LOAD whose ``init`` failed cannot load."""
    returned = entry.backend_status
    if returned is None or entry.calls == 0:
        return ()
    if action is Action.LOAD:
        passed_on = returned == RuntimeErrorCode.Ok or entry.status != RuntimeErrorCode.Ok
    else:
        passed_on = returned == entry.status
    if passed_on:
        return ()
    hook = HOOKS[action]
    return (Difference(DifferenceKind.BACKEND_STATUS, name, hook, returned, entry.status),)


def _caller_end(
    name: str,
    entry: ReportEntry,
    expected: tuple[Option, ...],
    others: tuple[BackendOptions, ...],
    values_checked: bool,
) -> tuple[Difference, ...]:
    """A recorded GET's other end: the span the runtime handed back to its caller, against
    the span the backend's call left (option by option) and against the expectation."""
    caller = entry.caller_received
    if caller is None:
        return (Difference(DifferenceKind.NOT_RECORDED, name, HOOKS[Action.GET], actual=entry),)
    left = entry.delivered
    if len(caller) == len(left) and all(_same(a, b) for a, b in zip(caller, left, strict=True)):
        return ()  # one span at both ends: the backend end's check covers it
    changed = []
    for index in range(max(len(left), len(caller))):
        own = left[index] if index < len(left) else None
        got = caller[index] if index < len(caller) else None
        if own is not None and got is not None and _same(own, got):
            continue
        key = got.key if got is not None else own.key if own is not None else None
        changed.append(
            Difference(
                DifferenceKind.CHANGED_ON_RETURN,
                name,
                key,
                None if own is None else own.value,
                None if got is None else got.value,
            )
        )
    _, against_expected = _align(name, expected, caller, others, values_checked, returned=True)
    at_caller = tuple(replace(d, note=_AT_CALLER) for d in against_expected)
    return (*changed, *at_caller)


_AT_CALLER = "as get_option handed it back to its caller"


def _align(
    name: str,
    expected: tuple[Option, ...],
    received: tuple[Option, ...],
    others: tuple[BackendOptions, ...],
    values_checked: bool,
    *,
    returned: bool,
) -> tuple[tuple[OptionRow, ...], tuple[Difference, ...]]:
    """Pair sent and received options by key and name what differs about each pair
    (``returned``: a GET's, the options get_option returned against those expected)."""
    if expected and not received:
        rows = tuple(OptionRow(i, o, None, None) for i, o in enumerate(expected))
        nothing = Difference(
            DifferenceKind.NOTHING_DELIVERED, name, None, tuple(expected), (), returned=returned
        )
        return rows, (nothing,)
    if values_checked and expected == received:  # the usual case: exact delivery
        return tuple(OptionRow(i, o, i, o) for i, o in enumerate(received)), ()
    unused = dict(enumerate(received))
    by_key: dict[str, list[int]] = {}
    for j, got in enumerate(received):
        by_key.setdefault(got.key, []).append(j)
    paired_rows: list[OptionRow] = []
    for i, option in enumerate(expected):
        candidates = by_key.get(option.key)
        if not candidates:
            missing = Difference(
                DifferenceKind.MISSING_OPTION, name, option.key, option.value, returned=returned
            )
            paired_rows.append(OptionRow(i, option, None, None, missing))
            continue
        j = candidates.pop(0)
        got = unused.pop(j)
        paired_rows.append(
            OptionRow(i, option, j, got, _compare(name, option, got, values_checked, returned))
        )
    paired_rows += [
        OptionRow(None, None, j, got, _unpaired(name, got, expected, others, returned))
        for j, got in unused.items()
    ]
    differences = [r.difference for r in paired_rows if r.difference is not None]
    order = [
        r.received_index for r in paired_rows if r.sent is not None and r.received_index is not None
    ]
    if order != sorted(order):
        keys_sent = tuple(o.key for o in expected)
        keys_received = tuple(o.key for o in received)
        differences.append(
            Difference(
                DifferenceKind.WRONG_ORDER, name, None, keys_sent, keys_received, returned=returned
            )
        )
    return tuple(paired_rows), tuple(differences)


def _unpaired(
    name: str,
    got: Option,
    expected: tuple[Option, ...],
    others: tuple[BackendOptions, ...],
    returned: bool,
) -> Difference:
    """An option received that no sent option pairs with: another backend's (MISROUTED),
    one more than was sent (EXTRA_OPTION), or any when none was sent."""
    owners = tuple(b.backend_id for b in others if any(_same(o, got) for o in b.options))
    if owners:
        kind = DifferenceKind.MISROUTED
    elif expected:
        kind = DifferenceKind.EXTRA_OPTION
    else:
        kind = DifferenceKind.UNEXPECTED_DELIVERY
    note = "a second option with this key" if any(o.key == got.key for o in expected) else ""
    return Difference(kind, name, got.key, None, got.value, owners, note, returned)


def _compare(
    name: str, sent: Option, got: Option, values_checked: bool, returned: bool
) -> Difference | None:
    kind = None
    if type(sent.value) is not type(got.value):
        kind = DifferenceKind.WRONG_TYPE
    elif values_checked and sent.value != got.value:
        kind = DifferenceKind.WRONG_VALUE
    if kind is None:
        return None
    return Difference(kind, name, sent.key, sent.value, got.value, returned=returned)


def _same(a: Option, b: Option) -> bool:
    """Equal key, type and value: ``True`` is not ``1``."""
    return a.key == b.key and type(a.value) is type(b.value) and a.value == b.value
