"""The one settings validator: types from the dataclass, rules from the caller, one wording."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.config.settings import ProfileError, check_known, parse_settings, refuse
from harness.untrusted.value_rules import check_port

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


FIELDS = {"host": None, "port": check_port, "pulse": None, "flow": None, "line": None,
          "key_file": None}


def parse(data: dict, **given):
    return parse_settings(Example, data, WHERE, fields=FIELDS, base=Path("/profiles"),
                          required={"host": "required, a host name"}, **given)


def test_a_valid_mapping_becomes_the_dataclass() -> None:
    got = parse({"host": "b", "port": 22, "pulse": 1, "flow": True, "line": "dtr",
                 "key_file": "keys/id"}, work_dir="/w")
    assert got == Example("b", 22, 1, True, Line.DTR, Path("/profiles/keys/id"), "/w")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"host": "b", "parity": "N"}, "transport.parity: unknown field; allowed: flow, host, "
         "key_file, line, port, pulse"),
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
