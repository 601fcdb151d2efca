"""Edges of the runtime's registry and options map that upstream's code defines.

- The registry holds 16 backends (``kMaxRegisteredBackends``); ``register_backend``
  checks "full" before "duplicate", so a duplicate name gives InvalidArgument while
  there is room and Internal once all 16 slots are used. Registrations last for the
  process, so these tests start a fresh agent.
- ``LoadBackendOptionsMap::set_options`` takes a backend id of at most 63 bytes; a
  64-byte id is refused (InvalidArgument). The wire format cannot carry a 64-byte id,
  so the request uses the agent directive ``etb.id_suffix`` (docs/wire-format.md).
- An empty option list is a map entry (accepted) that delivers nothing.
- ``BackendInitContext::get_runtime_spec<T>`` scans the span in order: of two equal
  keys the first wins. Requests refuse duplicate keys, so the second copy is sent as
  ``etb.dup:KEY``, which the agent delivers as ``KEY``; the probe reports what the
  lookup returned as ``etb.lookup:KEY`` (or ``etb.lookup_error:KEY`` = the Error).
- ``LoadBackendOptionsMap::set_options`` given an id it holds already replaces that id's
  options (``backend_options_map.h``: "they will be replaced"). A request cannot name an
  id twice in one list (``DUPLICATE_BACKEND``), so it names ``Probe`` with
  ``etb.id_suffix`` ``A`` beside ``ProbeA``: the map is given ``ProbeA`` twice, and the
  delegate gets exactly the second set, on every load path the device serves.
- ``get_runtime_spec<T>(key)`` (``backend_init_context.h``) returns the value when the
  key's option holds a T, ``InvalidArgument`` when it holds another type, ``NotFound``
  when no option has the key: each of bool, int and string asked of each, on every load
  path. The probe answers an option ``etb.ask:KEY`` = ``"bool,int,string"`` with
  ``etb.as_TYPE:KEY`` = the value (or ``etb.as_TYPE_error:KEY`` = the Error) after what
  it received (docs/agent.md).

Directive tests need an agent announcing them (HELLO fact ``directives``); others
skip them with the reason.
"""

from __future__ import annotations

import pytest

from harness.check import Action, LoadPath, Outcome, Request, RuntimeErrorCode
from harness.options import BackendOptions, Option, OptionsMap

from .maps import single

pytestmark = pytest.mark.capability("register")

REGISTRY_SLOTS = 16


@pytest.fixture
def directives(et):
    """The runner, on an agent that serves the LOAD directives; skips the test otherwise."""
    served = str(et.hello.fact("directives") or "").split(",")
    if not {"etb.dup:", "etb.id_suffix"} <= set(served):
        pytest.skip(
            "the device's agent announces no LOAD directives (HELLO fact 'directives'), "
            "so duplicate keys and 64-byte ids cannot reach its runtime"
        )
    return et


def statuses(report) -> list[tuple[str, int]]:
    return [(e.name, e.status) for e in report.entries]


def test_registry_capacity_is_sixteen(et):
    assert et.capacity == REGISTRY_SLOTS


def test_duplicate_name_gives_invalid_argument_while_there_is_room(et):
    et.restart()
    real = et.registered  # what the device registers itself, e.g. XnnpackBackend
    first = et.register(["EdgeP0"])
    assert statuses(first) == [("EdgeP0", RuntimeErrorCode.Ok)]
    again = et.register(["EdgeP0", *real[:1]])
    assert statuses(again) == [
        ("EdgeP0", RuntimeErrorCode.InvalidArgument),
        *((name, RuntimeErrorCode.InvalidArgument) for name in real[:1]),
    ]


def test_full_registry_gives_internal_even_for_a_duplicate(et):
    et.restart()
    room = REGISTRY_SLOTS - len(et.registered)
    names = [f"EdgeP{i}" for i in range(room)]
    filled = et.register(names)
    assert statuses(filled) == [(name, RuntimeErrorCode.Ok) for name in names]
    assert len(et.send(Request(Action.HELLO)).entries) == REGISTRY_SLOTS
    over = et.register(["EdgeNew", names[0]])
    assert statuses(over) == [
        ("EdgeNew", RuntimeErrorCode.Internal),
        (names[0], RuntimeErrorCode.Internal),
    ]  # full checked first


def test_empty_option_list_is_accepted_and_delivers_nothing(et):
    options = OptionsMap(
        (BackendOptions("ProbeA", ()), BackendOptions("ProbeB", (Option("k", 1),)))
    )
    verdict = et.load(options)
    verdict.raise_for_differences()
    entry = verdict.report.entry("ProbeA")
    assert entry is not None and entry.calls == 1 and entry.options == ()


def test_63_byte_id_is_accepted(directives, probe_program):
    name = "E" * 63
    options = single("E" * 62, Option("etb.id_suffix", "E"), Option("k", 1))
    directives.prepare([name])
    report = directives.send(Request.load(probe_program((name,)), (name,), options))
    assert report.outcome is Outcome.OK, report.message
    assert [(e.name, e.options) for e in report.entries] == [(name, (Option("k", 1),))]


def test_64_byte_id_is_refused_with_invalid_argument(directives, probe_program):
    name = "E" * 63
    options = single(name, Option("etb.id_suffix", "E"), Option("k", 1))
    directives.prepare([name])
    report = directives.send(Request.load(probe_program((name,)), (name,), options))
    assert (report.outcome, report.detail) == (
        Outcome.RUNTIME_ERROR,
        RuntimeErrorCode.InvalidArgument,
    )
    assert "LoadBackendOptionsMap::set_options" in report.message and "64 bytes" in report.message


@pytest.mark.parametrize(
    ("first", "second", "lookup"),
    [
        (1, 2, Option("etb.lookup:k", 1)),
        ("a", "b", Option("etb.lookup:k", "a")),
        (True, False, Option("etb.lookup:k", True)),
        # The first copy is found first; its type does not match the second's.
        (7, "seven", Option("etb.lookup_error:k", int(RuntimeErrorCode.InvalidArgument))),
    ],
    ids=["int", "string", "bool", "types-differ"],
)
def test_first_of_two_equal_keys_wins_in_get_runtime_spec(
    directives, probe_program, first, second, lookup
):
    options = single("ProbeA", Option("k", first), Option("other", 0), Option("etb.dup:k", second))
    directives.prepare(["ProbeA"])
    report = directives.send(Request.load(probe_program(("ProbeA",)), ("ProbeA",), options))
    assert report.outcome is Outcome.OK, report.message
    entry = report.entry("ProbeA")
    assert entry is not None
    # The raw span reached init as sent, both copies in order; then the lookup.
    assert entry.options == (Option("k", first), Option("other", 0), Option("k", second), lookup)


def load_on(et, path: LoadPath, program: str, delegates: tuple[str, ...], options: OptionsMap):
    """A LOAD on ``path`` whose map in force is ``options`` (on module_both the explicit map;
    the stored map is the same one); skips a path the device does not serve."""
    if path not in et.load_paths:
        pytest.skip(f"the device's agent does not serve load path {path.label}")
    method_options = options if path is LoadPath.MODULE_BOTH else None
    return et.send(
        Request.load(program, delegates, options, path=path, method_options=method_options)
    )


@pytest.mark.parametrize("path", list(LoadPath), ids=lambda p: p.label)
@pytest.mark.parametrize("suffixed_first", [True, False], ids=["suffixed-first", "plain-first"])
def test_an_id_given_twice_to_one_map_gets_the_second_options(
    directives, probe_program, path, suffixed_first
):
    suffixed = BackendOptions("Probe", (Option("etb.id_suffix", "A"), Option("set", "suffixed")))
    plain = BackendOptions("ProbeA", (Option("set", "plain"), Option("n", 2)))
    given = (suffixed, plain) if suffixed_first else (plain, suffixed)
    directives.prepare(["ProbeA"])
    report = load_on(directives, path, probe_program(("ProbeA",)), ("ProbeA",), OptionsMap(given))
    assert report.outcome is Outcome.OK, report.message
    second = tuple(o for o in given[1].options if o.key != "etb.id_suffix")
    assert [(e.name, e.options) for e in report.entries] == [("ProbeA", second)]


VALUES: dict[str, bool | int | str] = {"bool": True, "int": 7, "string": "seven"}


@pytest.mark.parametrize("path", list(LoadPath), ids=lambda p: p.label)
@pytest.mark.parametrize("held", list(VALUES))
def test_get_runtime_spec_of_another_type_is_invalid_argument(
    directives, probe_program, path, held
):
    received = (
        Option("k", VALUES[held]),
        Option("etb.ask:k", "bool,int,string"),
        Option("etb.ask:absent", "int"),
    )
    directives.prepare(["ProbeA"])
    report = load_on(
        directives, path, probe_program(("ProbeA",)), ("ProbeA",), single("ProbeA", *received)
    )
    assert report.outcome is Outcome.OK, report.message
    answers = tuple(
        Option(f"etb.as_{asked}:k", VALUES[held])
        if asked == held
        else Option(f"etb.as_{asked}_error:k", int(RuntimeErrorCode.InvalidArgument))
        for asked in VALUES
    )
    not_found = Option("etb.as_int_error:absent", int(RuntimeErrorCode.NotFound))
    assert [(e.name, e.options) for e in report.entries] == [
        ("ProbeA", (*received, *answers, not_found))
    ]
