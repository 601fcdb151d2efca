"""Hostile profiles, map files and command lines: refused with one clear line, never a
hang, a flood of text, a traceback or a command run.

Each refusal names the file, the place (line or entry path), the limit and the fix.
Where the old behaviour was a hang or minutes of work, the command runs in a
subprocess under a generous timeout, so that a regression fails the test instead of
hanging CI; no test times anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.codec.mapfile import MapFileError, load_map
from harness.codec.strict_yaml import MAX_DEPTH, MAX_NUMBER_CHARS, MAX_VALUES, YamlError, read_yaml
from harness.farm.selection import DeviceSelectionError, select_profiles
from harness.profiles.device_profile import ProfileError, load_profile
from harness.untrusted.reading import (
    BRIEF_CHARS,
    MAX_INPUT_BYTES,
    InputFileError,
    brief,
    read_bounded_text,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "maps" / "sample.yaml"
HANG_TIMEOUT_S = 20  # far beyond any refusal here; only a hang or minutes of work reach it
SHORT = 400  # an error line longer than this quotes too much of the input


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def one_line(message: str) -> str:
    assert "\n" not in message and "Traceback" not in message, message[:2000]
    assert len(message) < SHORT, message[:2000]
    return message


def map_error(path: Path) -> str:
    """The MapFileError for ``path``: one short line starting with the file name."""
    with pytest.raises(MapFileError) as info:
        load_map(path)
    message = one_line(str(info.value))
    assert message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")


def map_text_error(tmp_path: Path, text: str, name: str = "m.yaml") -> str:
    return map_error(write(tmp_path, name, text))


def profile_error(path: Path) -> str:
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    message = one_line(str(info.value))
    assert message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``et-harness ARGS`` in a fresh process, ended if it runs past HANG_TIMEOUT_S."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT_S,
        check=False,
    )


def cli_error(*args: str) -> str:
    """The one line an ``et-harness`` refusal prints (exit 2, nothing on stdout)."""
    done = run_cli(*args)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-2000:]
    return one_line(done.stderr.rstrip("\n"))


def option_map(option: str) -> str:
    return f"backends:\n  A:\n    - {option}\n"


def alias_bomb(levels: int = 9) -> str:
    """A flow list whose last alias stands for 9**levels strings: the "billion laughs"."""
    parts = ["&a [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    names = "abcdefghijklmnop"
    for level in range(1, levels):
        parts.append(f"&{names[level]} [" + ",".join([f"*{names[level - 1]}"] * 9) + "]")
    return "[" + ", ".join(parts) + "]"


PROFILE = "transport: {kind: local}\nwork_dir: /tmp/et-harness/hostile\n"


# ------------------------------------------------------- what is read at all: regular files


@pytest.fixture(params=["fifo", "dev-zero-link", "directory"])
def not_a_file(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    """A path ending in .yaml that is a FIFO, a symlink to /dev/zero or a directory."""
    path = tmp_path / "x.yaml"
    if request.param == "fifo":
        os.mkfifo(path)  # reading it would block until a writer came
        return path, "a FIFO, not a regular file"
    if request.param == "dev-zero-link":
        path.symlink_to("/dev/zero")  # reading it would never end
        return path, "a character device, not a regular file"
    path.mkdir()
    return path, "a directory, not a regular file"


def test_only_regular_files_are_read(not_a_file: tuple[Path, str]) -> None:
    path, kind = not_a_file
    with pytest.raises(InputFileError) as info:
        read_bounded_text(path)
    assert str(info.value) == f"{path}: {kind}; give the path of a regular file"
    assert map_error(path) == f"{kind}; give the path of a regular file"


def test_a_map_that_is_not_a_file_is_refused_without_blocking(
    not_a_file: tuple[Path, str],
) -> None:
    path, kind = not_a_file
    assert cli_error("map", str(path)) == (
        f"et-harness map: {path}: {kind}; give the path of a regular file"
    )


def test_a_profile_that_is_not_a_file_is_refused_without_blocking(
    not_a_file: tuple[Path, str],
) -> None:
    path, _ = not_a_file
    message = cli_error("send", str(SAMPLE), "--device", str(path))
    assert message.startswith(f"et-harness send: {path}: not a file")


def test_a_50_mb_map_is_refused_by_its_size_before_a_byte_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as sparse:  # 50 MB of NUL bytes: reading any would be refused otherwise
        sparse.truncate(50 * 1024 * 1024)
    message = cli_error("map", str(path))
    assert message == (
        f"et-harness map: {path}: 52428800 bytes, limit 1048576 bytes (1 MiB); check the path, "
        "or split the file"
    )


def test_the_size_limit_is_exact(tmp_path: Path) -> None:
    text = "backends: {}\n#"
    at_limit = write(tmp_path, "at.yaml", text + "x" * (MAX_INPUT_BYTES - len(text) - 1) + "\n")
    assert at_limit.stat().st_size == MAX_INPUT_BYTES
    assert load_map(at_limit).backends == ()
    over = write(tmp_path, "over.yaml", text + "x" * (MAX_INPUT_BYTES - len(text)) + "\n")
    assert map_error(over).startswith("1048577 bytes, limit 1048576 bytes (1 MiB)")
    profile = write(tmp_path, "p.yaml", PROFILE + "#" + "x" * MAX_INPUT_BYTES + "\n")
    assert profile_error(profile).startswith(f"{profile.stat().st_size} bytes, limit 1048576")


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    assert map_error(tmp_path / "gone.json") == "cannot read the file: No such file or directory"


# ----------------------------------------------------------------------- encodings, bytes


def test_a_file_name_with_escape_sequences_reaches_no_terminal(tmp_path: Path) -> None:
    """A contract file or map named by anyone (a cloned project's devices/backends/):
    its name is shown printable in the error, never as a terminal escape."""
    path = tmp_path / "x\x1b]0;owned\x07\x1b[31m.yaml"
    path.write_text("backends: [1]\n", encoding="utf-8")
    with pytest.raises(MapFileError) as refused:
        load_map(path)
    message = str(refused.value)
    assert "\x1b" not in message and "\x07" not in message, message
    assert "x?]0;owned??[31m.yaml: backends: a mapping of backend id" in message, message


def test_encodings(tmp_path: Path) -> None:
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbf" + option_map("{key: k, value: 1}").encode())
    assert load_map(bom).backends[0].options[0].value == 1
    profile_bom = tmp_path / "pbom.yaml"
    profile_bom.write_bytes(b"\xef\xbb\xbf" + PROFILE.encode())
    assert load_profile(str(profile_bom)).kind == "local"
    utf16 = tmp_path / "u16.yaml"
    utf16.write_bytes("backends: {}\n".encode("utf-16"))
    assert map_error(utf16) == "UTF-16 (it starts with a UTF-16 BOM); save it as UTF-8"
    latin1 = tmp_path / "l1.yaml"
    latin1.write_bytes(PROFILE.encode() + b"description: caf\xe9\n")
    assert profile_error(latin1) == f"byte {len(PROFILE) + 16}: not UTF-8; save the file as UTF-8"


@pytest.mark.parametrize(
    ("raw", "code", "escape"),
    [
        ("\0", "U+0000", "\\x00"),
        ("\x01", "U+0001", "\\x01"),
        ("\x1b", "U+001B", "\\x1B"),
        ("\x7f", "U+007F", "\\x7F"),
    ],
)
def test_raw_control_bytes_in_yaml(tmp_path: Path, raw: str, code: str, escape: str) -> None:
    assert map_text_error(tmp_path, option_map(f'{{key: k, value: "a{raw}b"}}')) == (
        f"line 3, column 25: character {code} (a control character) is not allowed in YAML; "
        f'remove it, or write the escape "{escape}" inside a double-quoted string'
    )
    profile = write(tmp_path, "p.yaml", PROFILE + f"description: x{raw}\n")
    assert profile_error(profile).startswith(f"line 3, column 15: character {code}")


def test_raw_control_bytes_in_json(tmp_path: Path) -> None:
    message = map_text_error(tmp_path, '{"backends": {"A\0": []}}', "m.json")
    assert message == "line 1, column 17: not valid JSON: Invalid control character at"


# --------------------------------------------------------------- structure: depth, aliases


@pytest.mark.parametrize("name", ["deep.yaml", "deep.json"])
def test_100k_deep_nesting_is_one_line(tmp_path: Path, name: str) -> None:
    opening, closing = ("[", "]")
    path = write(tmp_path, name, '{"backends": ' + opening * 100_000 + closing * 100_000 + "}")
    message = cli_error("map", str(path))
    if name.endswith(".yaml"):
        assert message == (
            f"et-harness map: {path}: line 1, column {14 + MAX_DEPTH - 1}: nested deeper than the "
            f"limit of {MAX_DEPTH} levels (a profile or map file needs about 5): remove the extra "
            "brackets or indentation"
        )
    else:
        assert message.startswith(f"et-harness map: {path}: nested too deeply for the JSON reader")


def test_nesting_limit_is_exact() -> None:
    assert read_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "ok") == _nested(MAX_DEPTH)
    with pytest.raises(YamlError, match=f"nested deeper than the limit of {MAX_DEPTH}"):
        read_yaml("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "too deep")
    block = "".join(f"{'  ' * depth}k{depth}:\n" for depth in range(MAX_DEPTH + 1)) + "  v"
    with pytest.raises(YamlError, match="nested deeper"):
        read_yaml(block, "block")


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_deep_flow_sequences_in_a_profile(tmp_path: Path) -> None:
    profile = write(tmp_path, "p.yaml", PROFILE + "tags: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested deeper than the limit of 64 levels" in profile_error(profile)


def test_an_alias_bomb_as_an_option_value_is_refused_at_once(tmp_path: Path) -> None:
    text = option_map(f"{{key: k, value: {alias_bomb()}}}")
    assert len(text) < 400  # 387 million strings once expanded
    path = write(tmp_path, "bomb.yaml", text)
    message = cli_error("map", str(path))
    assert message.startswith(f"et-harness map: {path}: line 3, column ")
    assert message.endswith(
        f"more than {MAX_VALUES} values, counting each alias (*name) as the values it stands "
        f"for (limit {MAX_VALUES}, about three times what the largest valid map needs): "
        "write fewer values, or use fewer aliases"
    )


def test_an_alias_bomb_as_profile_tags_is_refused_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "bomb.yaml", PROFILE + f"tags: {alias_bomb()}\n")
    assert f"more than {MAX_VALUES} values" in profile_error(path)
    message = cli_error("send", str(SAMPLE), "--device", str(path))
    assert message.startswith(f"et-harness send: {path}: line 3, column ")


def test_aliases_within_the_limit_still_work(tmp_path: Path) -> None:
    text = (
        "backends:\n  A: &shared\n    - {key: n, value: 1}\n    - {key: s, value: x}\n"
        "  B: *shared\n"
    )
    options = load_map(write(tmp_path, "a.yaml", text))
    assert options.to_dict() == {"A": [("n", 1), ("s", "x")], "B": [("n", 1), ("s", "x")]}
    at_limit = "[" + ", ".join(["1"] * (MAX_VALUES - 1)) + "]"  # the list is a value too
    assert read_yaml(at_limit, "n") == [1] * (MAX_VALUES - 1)
    with pytest.raises(YamlError, match=f"more than {MAX_VALUES} values"):
        read_yaml("[" + ", ".join(["1"] * MAX_VALUES) + "]", "n")


def test_an_alias_inside_its_own_value_is_refused(tmp_path: Path) -> None:
    assert map_text_error(tmp_path, "backends: &a {A: *a}\n") == (
        "line 1, column 18: the alias '*a' is inside the value it names, which would have no "
        "end: write the value out instead"
    )


# ---------------------------------------------------- scalars other YAML readers read otherwise


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        (
            "1e3",
            (
                "'1e3' is a float only in YAML 1.2 (a string in YAML 1.1, which the harness "
                "reads): write 1000.0 for the float (1000 for an int), or quote it ('1e3') "
                "for a string"
            ),
        ),
        (
            "-2e-5",
            (
                "'-2e-5' is a float only in YAML 1.2 (a string in YAML 1.1, which the "
                "harness reads): write -2.0e-05 for the float, or quote it ('-2e-5') for a "
                "string"
            ),
        ),
        ("1.5e3", "write 1500.0 for the float (1500 for an int)"),
        ("-.5", "write -0.5 for the float"),
        ("1e400", "write .inf for the float"),
        (
            "0o17",
            (
                "'0o17' is an int only in YAML 1.2 (a string in YAML 1.1, which the harness "
                "reads): write 15 for the int, or quote it ('0o17') for a string"
            ),
        ),
        ("09", "'09' is an int only in YAML 1.2 (a string in YAML 1.1, which the harness reads)"),
    ],
)
def test_yaml_1_2_numbers_are_refused_with_the_fix(
    tmp_path: Path, scalar: str, expected: str
) -> None:
    message = map_text_error(tmp_path, option_map(f"{{key: k, value: {scalar}}}"))
    assert message.startswith("line 3, column 23: ") and expected in message
    profile = write(tmp_path, "p.yaml", PROFILE + f"timeouts: {{case: {scalar}}}\n")
    assert expected in profile_error(profile)


def test_quoted_yaml_1_2_numbers_are_strings(tmp_path: Path) -> None:
    text = option_map("{key: a, value: '1e3'}") + '    - {key: b, value: "0o17"}\n'
    text += "    - {key: c, value: !!str 1e3}\n"
    assert [o.value for o in load_map(write(tmp_path, "q.yaml", text)).backends[0].options] == [
        "1e3",
        "0o17",
        "1e3",
    ]


def test_merge_keys_are_refused(tmp_path: Path) -> None:
    text = "backends:\n  A:\n    - &base {key: k, value: 1}\n    - {<<: *base, key: j}\n"
    assert map_text_error(tmp_path, text) == (
        "line 4, column 8: '<<' merge keys exist only in YAML 1.1 (YAML 1.2 reads a key named "
        "'<<'): write the keys out, or quote it ('<<') for a key named <<"
    )
    profile = write(tmp_path, "p.yaml", "base: &b {kind: local}\ntransport: {<<: *b}\n")
    assert profile_error(profile).startswith("line 2, column 13: '<<' merge keys")


def test_huge_ints_are_refused_by_length(tmp_path: Path) -> None:
    digits = "9" * 5000  # int() of it raises in Python 3.11+
    expected = (
        f"the number '{'9' * (BRIEF_CHARS - 1)}... is 5000 characters long, limit 32: "
        "no {} takes a number that large; quote it for a string"
    )
    assert map_text_error(tmp_path, option_map(f"{{key: k, value: {digits}}}")) == (
        "line 3, column 23: " + expected.format("field")
    )
    text = '{"backends": {"A": [{"key": "k", "value": ' + digits + "}]}}"
    assert map_text_error(tmp_path, text, "m.json") == expected.format("option")
    profile = write(tmp_path, "p.yaml", PROFILE + f"timeouts: {{case: {digits}}}\n")
    assert "is 5000 characters long, limit 32" in profile_error(profile)


def test_an_impossible_date_is_one_line(tmp_path: Path) -> None:
    assert map_text_error(tmp_path, option_map("{key: k, value: 2024-13-45}")) == (
        "line 3, column 23: '2024-13-45' is read as a date or time, but not a valid one "
        "(month must be in 1..12): quote it for a string"
    )


# ---------------------------------------------------- errors quote a short prefix of a value


def test_brief_quotes_a_prefix_without_building_the_whole_text() -> None:
    assert brief("short") == "'short'"
    assert brief("x" * 10**6) == "'" + "x" * (BRIEF_CHARS - 1) + "..."
    shared: list[object] = ["lol"] * 9
    for _ in range(8):  # 9**9 strings, one list object per level: repr() would never end
        shared = [shared] * 9
    assert len(brief(shared)) == BRIEF_CHARS + 3
    assert brief(10**5000) == "<int of 16610 bits>"


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        (
            option_map("{key: '" + "k" * 500_000 + "', value: 1}"),
            "m.yaml",
            "backends.A[0].key: key is 500000 bytes of UTF-8, limit 1..63 bytes; shorten the key",
        ),
        (
            '{"backends": {"A": [{"' + "f" * 500_000 + '": 1}]}}',
            "m.json",
            "backends.A[0]: write {key: 'fffff",
        ),
        (
            '{"backends": {"A": [{"key": "k", "value": 1, "' + "t" * 500_000 + '": 1}]}}',
            "m.json",
            "backends.A[0]: unknown field 'tttt",
        ),
        (
            '{"backends": {"' + "P" * 500_000 + '": []}}',
            "m.json",
            "backends." + "P" * 80 + "...: backend id is 500000 bytes of UTF-8, limit 1..63",
        ),
        (
            '{"backends": {"' + "P" * 500_000 + '": [], "' + "P" * 500_000 + '": []}}',
            "m.json",
            "key 'PPPP",
        ),
        ('{"backends": {}, "' + "x" * 500_000 + '": 1}', "m.json", "unknown field 'xxxx"),
        ("backends: *" + "a" * 500_000 + "\n", "m.yaml", "found undefined alias 'aaaa"),
        (
            "backends: !" + "t" * 500_000 + " {}\n",
            "m.yaml",
            "could not determine a constructor for the tag '!ttt",
        ),
    ],
)
def test_long_values_are_quoted_short(tmp_path: Path, text: str, name: str, expected: str) -> None:
    assert expected in map_text_error(tmp_path, text, name)  # one line of < 400 characters


# ------------------------------------------------------------------------------- JSON


def test_json_duplicate_keys_are_found_in_linear_time(tmp_path: Path) -> None:
    keys = ", ".join(f'"k{i}": []' for i in range(60_000))
    path = write(tmp_path, "dup.json", '{"backends": {' + keys + ', "k0": []}}')
    assert path.stat().st_size > 700_000  # took 27 s when each key was counted in the list
    assert cli_error("map", str(path)) == (
        f"et-harness map: {path}: key 'k0' appears twice in one JSON object; merge or rename them"
    )


# ------------------------------------------------------------------ nothing in a file runs


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system",
        "!!python/object/new:os.system",
        "!!python/name:os.system",
        "!!python/module:os",
    ],
)
def test_python_tags_run_nothing(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "ran"
    command = json.dumps([f"touch {marker}"])
    assert "could not determine a constructor" in map_text_error(
        tmp_path, f"backends:\n  A: {tag} {command}\n"
    )
    profile = write(tmp_path, "p.yaml", PROFILE + f"description: {tag} {command}\n")
    assert "could not determine a constructor" in profile_error(profile)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('!!int "x"', "'x' is tagged 'int' but is no int: write the value without the tag"),
        ('!!int ""', "'' is tagged 'int' but is no int"),
        ('!!int "0b"', "'0b' is tagged 'int' but is no int"),
        ('!!float "+"', "'+' is tagged 'float' but is no float"),
        ('!!bool "x"', "'x' is tagged 'bool' but is no bool"),
        ('!!timestamp "x"', "'x' is tagged 'timestamp' but is no date or time"),
        ("!!map [1]", "not valid YAML: expected a mapping node, but found sequence"),
        ("!!set [a]", "not valid YAML: expected a mapping node, but found sequence"),
        ("!!bool [a]", "not valid YAML: expected a scalar node, but found sequence"),
    ],
)
def test_a_tag_on_a_value_not_of_its_kind_is_one_line(
    tmp_path: Path, value: str, expected: str
) -> None:
    message = map_text_error(tmp_path, f"backends:\n  A: [{{key: a, value: {value}}}]\n")
    assert message.startswith("line 2, column 23: ") and expected in message, message
    profile = write(tmp_path, "p.yaml", PROFILE + f"timeouts: {{case: {value}}}\n")
    message = profile_error(profile)
    assert message.startswith("line 3, column 18: ") and expected in message, message


# ------------------------------------------------------------------------ the command line


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("nonexistent", "et-harness doctor: unknown device 'nonexistent': no "),
        ("tag:nope", "et-harness doctor: --device tag:nope: no profile in "),
        ("", "et-harness doctor: --device is empty ('')"),
    ],
)
def test_doctor_with_an_unknown_device_or_tag(
    capsys: pytest.CaptureFixture[str], spec: str, expected: str
) -> None:
    assert cli.main(["doctor", "--device", spec]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and one_line(captured.err.rstrip("\n")).startswith(expected)


@pytest.mark.parametrize("command", [["send", str(SAMPLE)], ["run"], ["bench"], ["doctor"]])
@pytest.mark.parametrize("spec", ["", " ", ","])
def test_an_empty_device_is_refused_not_read_as_host(
    capsys: pytest.CaptureFixture[str], command: list[str], spec: str
) -> None:
    assert cli.main([*command, f"--device={spec}"]) == 2
    assert one_line(capsys.readouterr().err.rstrip("\n")) == (
        f"et-harness {command[0]}: --device is empty ({spec!r}); give profile names "
        "(host,ssh-emu), a path to a YAML profile, 'all' or 'tag:NAME', or leave --device "
        "out for host"
    )


def test_device_selection_refuses_empty_and_defaults_only_when_not_given() -> None:
    with pytest.raises(DeviceSelectionError, match=r"--device is empty \(''\)"):
        select_profiles("")
    assert [profile.name for profile in select_profiles(None)] == ["host"]


@pytest.mark.parametrize("option", ["--cases", "--per-case-cases", "--growth-cases"])
@pytest.mark.parametrize("value", ["0", "-3", "x", "1000001"])
def test_bench_counts_must_be_positive(
    capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", option, value])
    assert info.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"et-harness bench: error: argument {option}: ")
    assert last.endswith("is not within 1..1000000" if value != "x" else "is not a whole number")


def test_history_counts_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:  # SQLite raised OverflowError for it
        cli.main(["history", "--runs", "9" * 23])
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("is not within 1..1000000")


@pytest.mark.parametrize(
    "where", ["missing-dir/figures.json", "a-file/figures.json", ".", "fifo.json"]
)
def test_bench_json_path_is_checked_before_the_benchmark_runs(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    where: str,
) -> None:
    import harness.cli.bench

    (tmp_path / "a-file").write_text("")
    os.mkfifo(tmp_path / "fifo.json")  # opening it for writing would wait for a reader
    ran = []
    monkeypatch.setattr(harness.cli.bench, "benchmark", lambda *args: ran.append(args))
    target = tmp_path / where
    assert cli.main(["bench", "--json", str(target)]) == 2
    message = one_line(capsys.readouterr().err.rstrip("\n"))
    assert message.startswith(f"et-harness bench: --json {target}: cannot write there (")
    assert message.endswith("); give a writable file path")
    assert ran == []


def test_bench_json_check_leaves_no_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "figures.json"
    assert cli.main(["bench", "--json", str(target), "--device", "nope"]) == 2
    assert "unknown device 'nope'" in capsys.readouterr().err
    assert not target.exists()


def test_send_of_a_map_too_large_for_the_mcu_names_the_limit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = ["backends:"]
    for backend in range(4):
        lines.append(f"  Probe{backend}:")
        lines += [f"    - {{key: key{i:02d}, value: '{'v' * 100}'}}" for i in range(16)]
    path = write(tmp_path, "big.yaml", "\n".join(lines) + "\n")
    assert cli.main(["send", str(path), "--device", "mcu-emu"]) == 2
    message = one_line(capsys.readouterr().err.rstrip("\n"))
    assert message.startswith("et-harness send: mcu: the LOAD #")
    assert message.endswith(
        "bytes; the device accepts at most 4096 (max_message in its HELLO): "
        "make the request smaller"
    )


@pytest.mark.parametrize("args", [["map", str(SAMPLE), "--hex"], ["devices"]])
def test_output_into_a_closed_pipe_ends_quietly(args: list[str]) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # as `| head` does once it has its lines: no reader is left
        err = process.stderr.read().decode()
        code = process.wait(timeout=HANG_TIMEOUT_S)
    assert (code, err) == (141, "")  # 128 + SIGPIPE, as a shell reports a tool cut off


def test_the_documented_limits_are_the_enforced_ones() -> None:
    limits = (ROOT / "docs" / "map-files.md").read_text(encoding="utf-8").split("## Limits")[1]
    assert f"{MAX_INPUT_BYTES // (1 << 20)} MiB ({MAX_INPUT_BYTES:,} bytes)" in limits
    assert f"{MAX_DEPTH} levels" in limits and f"{MAX_VALUES:,} in the document" in limits
    assert f"{MAX_NUMBER_CHARS} characters" in limits
    assert f"first {BRIEF_CHARS} characters" in limits
