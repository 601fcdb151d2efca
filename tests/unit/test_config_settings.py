"""The one settings validator: types from the dataclass, rules from the caller, one wording."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.profiles.validator import (
    Field,
    ProfileError,
    Spec,
    check_known,
    one_of,
    parse_settings,
    refuse,
)
from harness.untrusted.value_rules import ValueRuleError, check_port, check_seconds

WHERE = "devices/x.yaml: transport"


class Line(enum.Enum):
    NONE = "none"
    DTR = "dtr"


@dataclass(frozen=True)
class Example:
    host: str
    port: int | None = None
    pulse: float = 0.1
    flow: bool = False
    line: Line = Line.NONE
    key_file: Path | None = None
    work_dir: str = "/tmp/w"  # given by the harness, never read from the file


FIELDS: dict[str, Spec] = {
    "host": None,
    "port": check_port,
    "pulse": None,
    "flow": None,
    "line": None,
    "key_file": None,
}


def parse(data: Mapping[str, object], **given: Any) -> Example:
    return parse_settings(
        Example,
        data,
        WHERE,
        fields=FIELDS,
        base=Path("/profiles"),
        required={"host": "required, a host name"},
        **given,
    )


def test_a_valid_mapping_becomes_the_dataclass() -> None:
    got = parse(
        {"host": "b", "port": 22, "pulse": 1, "flow": True, "line": "dtr", "key_file": "keys/id"},
        work_dir="/w",
    )
    assert got == Example("b", 22, 1, True, Line.DTR, Path("/profiles/keys/id"), "/w")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"host": "b", "parity": "N"},
            "transport.parity: unknown field; allowed: flow, host, key_file, line, port, pulse",
        ),
        ({"host": "b", "work_dir": "/etc"}, "transport.work_dir: unknown field"),
        ({}, "transport.host: required, a host name"),
        ({"host": 5}, "transport.host: must be a string; got 5"),
        ({"host": "b", "port": "22"}, "transport.port: must be an integer; got '22'"),
        ({"host": "b", "port": True}, "transport.port: must be an integer; got True"),
        ({"host": "b", "port": 0}, "transport.port: must be a TCP port, 1..65535; got 0"),
        ({"host": "b", "pulse": "1"}, "transport.pulse: must be a number of seconds; got '1'"),
        ({"host": "b", "flow": "yes"}, "transport.flow: must be true or false; got 'yes'"),
        ({"host": "b", "line": "rts"}, "transport.line: 'rts' is not one of none, dtr"),
        ({"host": "b", "key_file": 3}, "transport.key_file: must be a string; got 3"),
    ],
)
def test_every_refusal_names_the_file_and_the_field(data: dict, message: str) -> None:
    with pytest.raises(ProfileError) as refused:
        parse(data)
    assert str(refused.value).startswith(f"devices/x.yaml: {message}"), str(refused.value)


def test_top_level_fields_are_named_without_a_section() -> None:
    assert str(refuse("x.yaml:", "name", "bad")) == "x.yaml: name: bad"
    with pytest.raises(ProfileError, match=r"^x.yaml: nmae: unknown field; allowed: name$"):
        check_known({"nmae": 1}, ("name",), "x.yaml:")


# -- lists, maps and nested sections go through the same validator -------------------------


@dataclass(frozen=True)
class Limits:
    case: float = 30.0


@dataclass(frozen=True)
class Nested:
    words: tuple[str, ...] = ()
    ports: tuple[int, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    paths: Mapping[str, Path] = dataclasses.field(default_factory=dict)
    limits: Limits = Limits()
    later: str = "kept"


def _no_dash(value: str) -> None:
    if value.startswith("-"):
        raise ValueRuleError(f"{value!r} starts with '-'; give a plain word")


NESTED: dict[str, Spec] = {
    "words": Field(rule=_no_dash, means="a list of words, e.g. [a, b]"),
    "ports": check_port,
    "env": Field(key=_no_dash),
    "paths": None,
    "limits": Field(section={"case": check_seconds}),
    "later": Field(later=True),
}


def parse_nested(data: Mapping[str, object]) -> Nested:
    return parse_settings(
        Nested, data, "devices/x.yaml: agent", fields=NESTED, base=Path("/profiles")
    )


def test_lists_maps_and_sections_become_their_types() -> None:
    got = parse_nested(
        {
            "words": ["a", "b"],
            "ports": [22, 2222],
            "env": {"A": "1"},
            "paths": {"x": "rel/x"},
            "limits": {"case": 5},
            "later": 3,
        }
    )
    assert got == Nested(
        ("a", "b"), (22, 2222), {"A": "1"}, {"x": Path("/profiles/rel/x")}, Limits(5), later="kept"
    )  # a later field is left to the caller


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"words": "a"}, "agent.words: must be a list of words, e.g. [a, b]; got 'a'"),
        ({"words": ["a", 3]}, "agent.words[1]: must be a string; got 3"),
        ({"words": ["a", "-b"]}, "agent.words[1]: '-b' starts with '-'; give a plain word"),
        ({"ports": [22, "x"]}, "agent.ports[1]: must be an integer; got 'x'"),
        ({"ports": [0]}, "agent.ports[0]: must be a TCP port, 1..65535; got 0"),
        ({"ports": {"a": 1}}, "agent.ports: must be a list of integers; got {'a': 1}"),
        ({"env": ["A"]}, "agent.env: must be a mapping of names to strings; got ['A']"),
        ({"env": {"A": 1}}, "agent.env.A: must be a string; got 1"),
        ({"env": {"-A": "1"}}, "agent.env.-A: '-A' starts with '-'; give a plain word"),
        ({"env": {1: "x"}}, "agent.env: names must be strings; got 1"),
        ({"paths": {"x": 3}}, "agent.paths.x: must be a string; got 3"),
        ({"limits": 5}, "agent.limits: must be a mapping of case; got 5"),
        ({"limits": {"cse": 1}}, "agent.limits.cse: unknown field; allowed: case"),
        ({"limits": {"case": "1"}}, "agent.limits.case: must be a number of seconds; got '1'"),
        ({"limits": {"case": 0}}, "agent.limits.case: must be seconds > 0"),
    ],
)
def test_list_map_and_section_refusals_name_the_item(data: dict, message: str) -> None:
    with pytest.raises(ProfileError) as refused:
        parse_nested(data)
    assert str(refused.value).startswith(f"devices/x.yaml: {message}"), str(refused.value)


def test_one_of_names_the_choices_and_the_note() -> None:
    with pytest.raises(ProfileError, match=r"^x.yaml: mode: 'b' is not one of a, c \(c is slow\)$"):
        parse_settings(
            Mode, {"mode": "b"}, "x.yaml:", fields={"mode": one_of(("a", "c"), "c is slow")}
        )
    assert parse_settings(Mode, {"mode": "c"}, "x.yaml:", fields={"mode": one_of("ac")}).mode == "c"


@dataclass(frozen=True)
class Mode:
    mode: str = "a"
