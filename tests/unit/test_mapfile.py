"""harness.codec.mapfile: map files users write, and the errors they get for the usual mistakes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.codec.mapfile import MapFileError, load_map, parse_map
from harness.data.options import BackendOptions, Option, OptionsMap
from harness.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "maps"
DOCS = ROOT / "docs" / "map-files.md"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error(tmp_path: Path, text: str, name: str = "night.yaml") -> str:
    path = write(tmp_path, name, text)
    with pytest.raises(MapFileError) as info:
        load_map(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")


def yaml_option(option: str) -> str:
    return f"backends:\n  XnnpackBackend:\n    - {{key: ok, value: 1}}\n    - {option}\n"


# ------------------------------------------------------------------------ valid files


def test_sample_map() -> None:
    m = load_map(EXAMPLES / "sample.yaml")
    assert m.backend_ids == ("XnnpackBackend", "ProbeA", "ProbeB")
    assert m.for_backend("XnnpackBackend") == BackendOptions(
        "XnnpackBackend",
        (
            Option("workspace_sharing_mode", 1),
            Option("weight_cache_enabled", True),
            Option("packed_cache_path", "/data/local/tmp/cache"),
        ),
    )
    probe = m.for_backend("ProbeA")
    assert probe is not None
    assert probe.get("threads") == -4 and probe.get("low_latency") is False
    assert probe.get("label") == "schön · 速い · 🚀" and probe.get("clé_€") == "naïve"
    assert probe.get("empty") == "" and probe.get("file_mode") == "0755"
    assert {o.type for b in m.backends for o in b.options} == {1, 2, 3}
    assert m.for_backend("ProbeB") == BackendOptions("ProbeB")
    assert m.checked


def test_json_and_yaml_give_the_same_map(tmp_path: Path) -> None:
    document = {
        "backends": {
            "A": [
                {"key": "n", "value": 1},
                {"key": "b", "value": False},
                {"key": "s", "value": "é€😀", "type": "string"},
            ],
            "B": [],
        }
    }
    from_json = load_map(write(tmp_path, "m.json", json.dumps(document)))
    assert from_json == OptionsMap(
        (
            BackendOptions("A", (Option("n", 1), Option("b", False), Option("s", "é€😀"))),
            BackendOptions("B"),
        )
    )
    as_yaml = json.dumps(document, ensure_ascii=False)  # YAML reads no \ud83d\ude00 pairs
    assert load_map(write(tmp_path, "m.yml", as_yaml)) == from_json
    assert parse_map(document, "inline") == from_json


def test_the_empty_map_and_a_byte_order_mark(tmp_path: Path) -> None:
    assert load_map(write(tmp_path, "e.yaml", "backends: {}\n")) == OptionsMap()
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"backends": {}}')
    assert load_map(path) == OptionsMap()


def test_yaml_1_2_scalars_are_fine(tmp_path: Path) -> None:
    text = (
        yaml_option("{key: a, value: True}") + "    - {key: b, value: 0x1F}\n"
        "    - {key: c, value: -7}\n    - {key: d, value: 'on'}\n    - {key: e, value: '010'}\n"
    )
    options = load_map(write(tmp_path, "s.yaml", text)).backends[0].options
    assert [o.value for o in options] == [1, True, 31, -7, "on", "010"]


def test_int_limits_and_types(tmp_path: Path) -> None:
    m = load_map(write(tmp_path, "i.yaml", yaml_option("{key: a, value: -2147483648}")))
    assert m.backends[0].options[1] == Option("a", -(2**31))
    assert type(m.backends[0].options[0].value) is int


# ------------------------------------------------------------------------ errors


def test_the_documented_error_of_the_broken_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the docs show the path relative to the checkout
    with pytest.raises(MapFileError) as info:
        load_map("examples/maps/broken.yaml")
    shown = re.search(r"```text\n(.*?)\n```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    assert shown is not None
    assert str(info.value) == shown.group(1)
    assert info.value.location == "backends.XnnpackBackend[2].value"


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (
            "{key: x, value: 2147483648}",
            "backends.XnnpackBackend[1].value: int option 'x' is outside int32 "
            "(-2147483648..2147483647), the runtime's int; got 2147483648",
        ),
        (
            "{key: x, value: 1.5}",
            "backends.XnnpackBackend[1].value: float 1.5 is not an option value; options are "
            "bool, int (32-bit) or string",
        ),
        (
            "{key: x, value: }",
            "backends.XnnpackBackend[1].value: the value is empty (null); "
            "write a value, or '' for an empty string",
        ),
        ("{key: x, value: null}", "the value is empty (null)"),
        ("{key: x, value: 2024-01-01}", "backends.XnnpackBackend[1].value: date "),
        ("{key: x, value: [1]}", "list [1] is not an option value"),
        ("{key: x}", "backends.XnnpackBackend[1]: missing value"),
        ("{value: 1}", "backends.XnnpackBackend[1]: missing key"),
        (
            "{key: x, value: 1, typ: int}",
            "backends.XnnpackBackend[1]: unknown field 'typ'; an option has key, value and "
            "optional type",
        ),
        (
            "workspace_sharing_mode: 1",
            "backends.XnnpackBackend[1]: write {key: workspace_sharing_mode, value: 1} instead of "
            "{workspace_sharing_mode: 1}",
        ),
        (
            "just_a_string",
            "backends.XnnpackBackend[1]: an option is a mapping "
            "{key: ..., value: ...}; got string 'just_a_string'",
        ),
        (
            "{key: 5, value: 1}",
            "backends.XnnpackBackend[1].key: the key must be a string; got int 5: quote it",
        ),
        (
            "{key: mode, value: 123, type: string}",
            "backends.XnnpackBackend[1].value: int 123 does not match 'type: string': quote it",
        ),
        (
            "{key: mode, value: 'yes', type: bool}",
            "backends.XnnpackBackend[1].value: string 'yes' does not match 'type: bool': "
            "write a bool",
        ),
        ("{key: mode, value: true, type: int}", "bool true does not match 'type: int'"),
        (
            "{key: mode, value: 1, type: float}",
            "backends.XnnpackBackend[1].type: type 'float' is unknown; write bool, int or string",
        ),
        (
            "{key: ok, value: 2}",
            "backends.XnnpackBackend[1].key: backend 'XnnpackBackend' has key 'ok' twice "
            "(first at [0])",
        ),
        (
            "{key: '" + "k" * 64 + "', value: 1}",
            "backends.XnnpackBackend[1].key: key is 64 bytes of UTF-8, limit 1..63 bytes",
        ),
        (
            "{key: s, value: '" + "€" * 86 + "'}",
            "string option 's' is 258 bytes of UTF-8, limit 0..255 bytes",
        ),
        ('{key: s, value: "a\\0b"}', "string option 's' contains a NUL byte"),
    ],
)
def test_bad_options(tmp_path: Path, option: str, expected: str) -> None:
    assert expected in error(tmp_path, yaml_option(option))


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        (
            "on",
            "'on' is a bool only in YAML 1.1 (other tools read a string): quote it ('on') "
            "for a string, or write true or false for a bool",
        ),
        ("yes", "'yes' is a bool only in YAML 1.1"),
        ("Off", "'Off' is a bool only in YAML 1.1"),
        (
            "010",
            "'010' is the int 8 only in YAML 1.1 (octal, binary, sexagesimal or with '_'); "
            "write 8 for the int, or quote it ('010') for a string",
        ),
        ("0b11", "'0b11' is the int 3 only in YAML 1.1"),
        ("1_000", "'1_000' is the int 1000 only in YAML 1.1"),
        ("1:30", "'1:30' is the int 90 only in YAML 1.1"),
    ],
)
def test_yaml_1_1_scalars_are_refused_with_their_line(
    tmp_path: Path, scalar: str, expected: str
) -> None:
    message = error(tmp_path, yaml_option(f"{{key: x, value: {scalar}}}"))
    assert message.startswith("line 4, column 23: ")
    assert expected in message


def test_duplicate_backends_in_yaml_name_both_lines(tmp_path: Path) -> None:
    text = "backends:\n  A: []\n  B: []\n  A:\n    - {key: k, value: 1}\n"
    assert error(tmp_path, text) == (
        "line 4, column 3: key 'A' appears twice in one mapping (first at line 2); "
        "a later one would silently replace it: merge or rename them"
    )


def test_duplicate_field_in_one_option(tmp_path: Path) -> None:
    assert "key 'value' appears twice in one mapping" in error(
        tmp_path, yaml_option("{key: k, value: 1, value: 2}")
    )


def test_duplicate_keys_in_json(tmp_path: Path) -> None:
    text = '{"backends": {"A": [], "A": []}}'
    assert error(tmp_path, text, "m.json") == (
        "key 'A' appears twice in one JSON object; merge or rename them"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "backends:\n  X: workspace_sharing_mode\n",
            "backends.X: options are a mapping of key to value ({workspace_sharing_mode: 1}) or "
            "a list of '- {key: ..., value: ...}' lines; got string 'workspace_sharing_mode'",
        ),
        (
            "backends:\n  X:\n",
            "backends.X: no options (null); write [] for a backend without options",
        ),
        (
            "backends:\n  1: []\n",
            "backends.1: the backend id must be a string; got int 1: quote it",
        ),
        ("backends:\n  " + "P" * 64 + ": []\n", "backend id is 64 bytes of UTF-8, limit 1..63"),
        (  # control characters escaped: an id may not rewrite the terminal
            'backends:\n  "\\e[2J\\nFAKE": [1]\n',
            "backends.\\x1b[2J\\nFAKE[0]: an option is a mapping",
        ),
        (
            "backends:\n" + "".join(f"  P{i}: []\n" for i in range(9)),
            "backends: 9 backends, limit 8 (LoadBackendOptionsMap capacity); split the map",
        ),
        (
            "backends:\n  X:\n" + "".join(f"    - {{key: k{i}, value: 1}}\n" for i in range(65)),
            "backends.X: backend 'X' has 65 options, limit 64 per backend",
        ),
        ("backends: []\n", "backends: a mapping of backend id to options; got list []"),
        ("backends:\n", "backends: a mapping of backend id to options; got null"),
        ("backend:\n  X: []\n", "unknown field 'backend'; the only top-level field is 'backends'"),
        (
            "XnnpackBackend: {weight_cache_enabled: true}\n",
            "unknown field 'XnnpackBackend'; the only top-level field is 'backends': a backend's "
            "options go under it (backends: {XnnpackBackend: ...})",
        ),
        (
            "backends:\n  X: {a: 1, b: "
            + "s" * 256
            + "}\n  Y: [{key: a, value: "
            + "s" * 256
            + "}]\n",
            "backends.X.b: string option 'b' is 256 bytes of UTF-8, limit 0..255 bytes",
        ),
        ("backends:\n  X: {" + "k" * 64 + ": 1}\n", "backends.X.'kkkk"),
        ("backends:\n  Y: [{key: a, value: " + "s" * 256 + "}]\n", "backends.Y[0].value: string"),
        ("{}\n", "missing 'backends'; write 'backends: {}' for an empty map"),
        ("- backends\n", "a map file is a mapping with the field 'backends'; got list"),
        ("", "the file is empty; a map file starts with 'backends:'"),
        ("# only a comment\n", "the file is empty"),
        (
            "backends:\n  X:\n    - {key: a value: 1}\n",
            "line 3, column 20: not valid YAML: while parsing a flow mapping, expected ',' or '}', "
            "but got ':'",
        ),
        (
            "backends: {}\n---\nbackends: {}\n",
            "not valid YAML: expected a single document in the stream, but found another document",
        ),
        (
            "backends:\n  X: !!python/object:os.system []\n",
            "not valid YAML: could not determine a constructor",
        ),
    ],
)
def test_bad_documents(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error(tmp_path, text)


def test_the_mapping_form_reads_as_the_list_form(tmp_path: Path) -> None:
    """``Backend: {key: value}``, the form a person writes first: the same map as the list
    form, in the file's order, beside list-form backends; YAML and JSON alike."""
    mapping = write(
        tmp_path,
        "m.yaml",
        "backends:\n"
        "  XnnpackBackend: {weight_cache_enabled: true, workspace_sharing_mode: 1}\n"
        "  ProbeA:\n    packed_cache_path: /data/cache\n    file_mode: '0755'\n"
        "  ProbeB:\n    - {key: n, value: 1}\n    - {key: n2, value: '2', type: string}\n"
        "  ProbeC: {}\n",
    )
    listed = write(
        tmp_path,
        "l.yaml",
        "backends:\n  XnnpackBackend:\n"
        "    - {key: weight_cache_enabled, value: true}\n"
        "    - {key: workspace_sharing_mode, value: 1}\n"
        "  ProbeA:\n    - {key: packed_cache_path, value: /data/cache}\n"
        "    - {key: file_mode, value: '0755'}\n"
        "  ProbeB:\n    - {key: n, value: 1}\n    - {key: n2, value: '2'}\n  ProbeC: []\n",
    )
    as_json = write(
        tmp_path,
        "m.json",
        json.dumps(
            {
                "backends": {
                    "XnnpackBackend": {"weight_cache_enabled": True, "workspace_sharing_mode": 1},
                    "ProbeA": {"packed_cache_path": "/data/cache", "file_mode": "0755"},
                    "ProbeB": [{"key": "n", "value": 1}, {"key": "n2", "value": "2"}],
                    "ProbeC": {},
                }
            }
        ),
    )
    expected = load_map(listed)
    assert load_map(mapping) == expected == load_map(as_json)
    assert [o.key for o in expected.backends[0].options] == [
        "weight_cache_enabled",
        "workspace_sharing_mode",
    ]


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        ("{mode: }", "backends.X.mode: the value is empty (null); write a value"),
        ("{mode: 1.5}", "backends.X.mode: float 1.5 is not an option value"),
        ("{mode: [1]}", "backends.X.mode: list [1] is not an option value"),
        ("{5: 1}", "backends.X.5: the key must be a string; got int 5: quote it"),
        ("{mode: 4294967296}", "backends.X.mode: int option 'mode' is outside int32"),
        (
            "{key: mode, value: 1}",
            "backends.X: this reads as one option of the list form: write it as a list item, "
            "'- {key: ..., value: ...}', or as '{KEY: VALUE}' in the mapping form",
        ),
    ],
)
def test_the_mapping_forms_errors_name_the_file_and_the_key(
    tmp_path: Path, backend: str, expected: str
) -> None:
    assert expected in error(tmp_path, f"backends:\n  X: {backend}\n")


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    text = '{"backends": {\n  "A": [{"key": "k" "value": 1}]}}'
    assert error(tmp_path, text, "m.json") == (
        "line 2, column 21: not valid JSON: Expecting ',' delimiter"
    )


def test_json_floats_and_nulls_are_refused_with_the_path(tmp_path: Path) -> None:
    text = '{"backends": {"A": [{"key": "k", "value": 1.0}]}}'
    assert error(tmp_path, text, "m.json").startswith("backends.A[0].value: float 1.0 is not")
    text = '{"backends": {"A": [{"key": "k", "value": null}]}}'
    assert error(tmp_path, text, "m.json").startswith("backends.A[0].value: the value is empty")


def test_file_problems(tmp_path: Path) -> None:
    assert error(tmp_path, "backends: {}", "map.txt") == (
        "unknown suffix '.txt'; name the file .yaml, .yml or .json"
    )
    path = tmp_path / "latin1.yaml"
    path.write_bytes("backends:\n  A:\n    - {key: k, value: 'caf\xe9'}\n".encode("latin-1"))
    with pytest.raises(MapFileError, match=r"latin1\.yaml: byte 41: not UTF-8; save the file"):
        load_map(path)
    with pytest.raises(MapFileError, match=r"missing\.yaml: cannot read the file: No such file"):
        load_map(tmp_path / "missing.yaml")


def test_parse_map_names_its_source() -> None:
    with pytest.raises(MapFileError) as info:
        parse_map({"backends": {"A": [{"key": "k", "value": 2**31}]}}, "inline map")
    assert str(info.value).startswith("inline map: backends.A[0].value: int option 'k'")
    assert (info.value.source, info.value.location) == ("inline map", "backends.A[0].value")


@pytest.mark.parametrize(
    ("given", "says"),
    [({"ProbeA": {"threads": 4}}, "got dict (a dict: OptionsMap.from_dict(...))")]
    + [(value, f"got {type(value).__name__}") for value in (5, b"maps/app.yaml")],
)
def test_a_door_given_no_map_nor_path_says_what_goes_there(given: object, says: str) -> None:
    """``et.load({...})``, the first thing a person tries: one line naming what goes there,
    not pathlib's TypeError from deep inside; nothing is started before it."""
    from harness.codec.mapfile import as_map_file
    from harness.runner import CaseRunner

    def no_device() -> None:
        raise AssertionError("a device was brought up for an argument that is no map")

    runner = CaseRunner(no_device, lambda _: "")  # type: ignore[arg-type]
    for door in (runner.load, runner.set, runner.get, as_map_file):  # et.check_program's
        with pytest.raises(UsageError, match=re.escape(says)) as refused:
            door(given)  # type: ignore[arg-type]
        assert str(refused.value).startswith("a map (OptionsMap) or a map file's path")
