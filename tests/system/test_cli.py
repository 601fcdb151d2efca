"""The et-harness command line: results and errors as a person sees them."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import shipped
from harness.cli import main
from harness.profiles.device_profile import ProfileError

SAMPLE = "examples/maps/sample.yaml"


def test_map_validates_encodes_and_decodes_the_sample(capsys):
    assert main(["map", SAMPLE, "--hex"]) == 0
    out = capsys.readouterr().out
    assert "valid, 3 backends" in out and "decoded back identical" in out
    assert "packed_cache_path: string '/data/local/tmp/cache'" in out
    assert "00000000  45 54 42 4f 02 01" in out  # magic, version 2, request


def test_map_error_names_file_and_entry(capsys):
    assert main(["map", "examples/maps/broken.yaml"]) == 2
    assert "examples/maps/broken.yaml: backends.XnnpackBackend" in capsys.readouterr().err


def test_send_checks_what_et_load_checks(capsys):
    """A load covers the map's probes and XnnpackBackend (the harness's XNNPACK program),
    on send as in et.load: the user project's own XNNPACK map included."""
    assert main(["send", SAMPLE, "--device", "host"]) == 0
    out = capsys.readouterr().out
    assert "backend ProbeA: ok, 6 options exact" in out
    xnnpack = "backend XnnpackBackend: ok, 3 options exact (status Ok (0x00), init called once"
    assert f"{xnnpack}, recorded real backend)" in out
    assert "ignored backends" not in out
    assert main(["send", "examples/user-project/maps/app.yaml", "--device", "host"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("load check: ok, 1 backend as expected\n"), out
    assert "backend XnnpackBackend: ok, 2 options exact" in out


def _probe_a_beside(folder, backend: str, key: str):
    """A map file: ``ProbeA`` with one option, then ``backend`` with ``key``."""
    path = folder / f"{backend}.yaml"
    path.write_text(
        f"backends:\n  ProbeA:\n    - {{key: a, value: 1}}\n"
        f"  {backend}:\n    - {{key: {key}, value: 2}}\n"
    )
    return path


def test_a_load_refusal_is_the_same_on_send_and_et_load_and_names_the_command(tmp_path, capsys):
    """A real backend no program of the harness's delegates to cannot be checked at load:
    send and et.load refuse with one message (harness.runner.probes), naming --program."""
    path = _probe_a_beside(tmp_path, "QnnBackend", "qnn_runtime_log_level")
    assert main(["send", str(path), "--device", "host"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "et-harness send --program PTE --options MAP" in err
    from harness.codec.mapfile import load_map
    from harness.profiles.device_profile import load_profile
    from harness.runner import open_runner
    from harness.runner.probes import ProbeRuleError

    device, runner = open_runner(load_profile("host"))
    try:
        with pytest.raises(ProbeRuleError) as refused, runner.unjudged():
            runner.load(load_map(path))
    finally:
        runner.close()
        device.close()
    assert err == f"et-harness send: {refused.value}\n"


def test_send_says_the_device_has_no_such_backend(tmp_path, capsys):
    """A backend id the device lacks is never registered as a probe behind the user's back:
    set gives the runtime's NotFound, a load leaves it out; either is a failure naming it.
    Declared with --probe, it is a probe, and the verdict line says the harness registered it."""
    npu = tmp_path / "realnpu.yaml"
    npu.write_text("backends:\n  NpuBackend:\n    - {key: num_threads, value: 2}\n")
    assert main(["send", str(npu), "--action", "set", "--device", "host"]) == 1
    out = capsys.readouterr().out
    assert "exact" not in out and "NO_SUCH_BACKEND" in out
    assert "backend NpuBackend: 1 difference (status NotFound (0x20), no such backend" in out
    assert main(["send", str(npu), "--action", "set", "--probe", "NpuBackend"]) == 0
    out = capsys.readouterr().out
    probe = "backend NpuBackend: ok, 1 option exact (status Ok (0x00), set_option called once"
    assert f"{probe}, probe registered by the harness)" in out
    typo = _probe_a_beside(tmp_path, "XnnpackBakend", "num_threads")
    assert main(["send", str(typo), "--device", "host"]) == 1
    out = capsys.readouterr().out
    assert "backend ProbeA: ok, 1 option exact" in out
    assert "backend XnnpackBakend: 1 difference (no such backend on the device)" in out
    assert "the runtime ignores its entry of the map" in out and "ignored backends" not in out


def test_send_get_shows_what_get_option_returned_per_backend_and_key(tmp_path, capsys):
    chosen = tmp_path / "get.yaml"
    chosen.write_text(
        "backends:\n  ProbeA:\n    - {key: threads, value: 7}\n    - {key: mode, value: fast}\n"
        "  XnnpackBackend:\n    - {key: weight_cache_enabled, value: true}\n  ProbeB: []\n",
        "utf-8",
    )
    assert main(["send", str(chosen), "--device", "host", "--action", "get"]) == 0
    out = capsys.readouterr().out.splitlines()
    returned = out[out.index("returned by get_option:") :]
    assert returned[:4] == [
        "returned by get_option:",
        "  ProbeA:",
        "    threads: int 7",
        "    mode:    string 'fast'",
    ]
    # The real backend's own value, whatever the runtime keeps: a bool, as its contract says.
    assert returned[4] == "  XnnpackBackend:"
    assert re.fullmatch(r"    weight_cache_enabled: bool (true|false)", returned[5]), returned
    assert returned[6:] == ["  ProbeB: no options"]
    chosen.write_text("backends:\n  NpuBackend: {perf_mode: 2}\n", "utf-8")
    assert main(["send", str(chosen), "--device", "host", "--action", "get"]) == 1
    out = capsys.readouterr().out.splitlines()  # the map's own values are no answer
    assert out[out.index("returned by get_option:") + 1 :] == [
        "  NpuBackend (status NotFound (0x20)): nothing, no such backend"
    ], out


@pytest.mark.parametrize(
    "command",
    [["send", SAMPLE, "--device", "nope"], ["emu", "nope"], ["bench", "--device", "nope"]],
)
def test_unknown_device_is_one_clear_line(capsys, command):
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"et-harness {command[0]}: unknown device 'nope'")
    assert "Traceback" not in err


def test_send_and_doctor_hold_a_lab_place_for_their_length(capsys, monkeypatch, tmp_path):
    """send and doctor reserve a lab profile's place themselves (no longer refused for
    pytest's sake): a coordinator that does not answer is one line naming it."""
    from harness.lab import client_session as session

    monkeypatch.setattr(session, "RECONNECT_S", 0.2)
    for name in ("lab-mcu", "lab-linux"):  # at an address where nothing listens
        shipped = (Path("devices") / f"{name}.yaml").read_text()
        (tmp_path / f"{name}.yaml").write_text(shipped.replace("127.0.0.1:20408", "127.0.0.1:9"))
    assert main(["send", SAMPLE, "--device", str(tmp_path / "lab-mcu.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("et-harness send: ") and err.count("\n") == 1
    assert "labgrid coordinator 127.0.0.1:9 did not answer" in err, err
    assert main(["doctor", "--device", str(tmp_path / "lab-linux.yaml")]) == 1
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out[1:] if not line.startswith(" ")]
    assert [line.split()[:2] for line in lines] == [["lab-linux", "UNAVAILABLE"]], out
    assert "did not answer" in lines[0]


@pytest.mark.parametrize(
    "command, says",
    [
        (["run"], ["(default: host)", "every other argument goes to pytest"]),
        (["send"], ["(default: host)", "set_option", "(default: load)"]),
        (["bench"], ["a,b,c (default: host)", "(default: 300)"]),
    ],
)
def test_help_says_the_defaults_a_person_gets(capsys, command, says):
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert all(text in shown for text in says), shown


def test_device_listing_keeps_its_columns_for_long_names(capsys):
    assert main(["devices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("host-helgrind ") for line in lines)  # 13 characters
    starts = {len(line) - len(line[line.index(" ") :].lstrip()) for line in lines}
    assert len(starts) == 1, lines  # every transport starts in one column


def test_device_listing_shows_file_names_printable(capsys, monkeypatch, tmp_path):
    """A project's profile file names are anyone's: the listing may not carry their escape
    sequences or line breaks to the terminal; a pyproject.toml of any shape is read."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("tool = 5\n")  # no pytest section: not a project
    monkeypatch.chdir(other)
    assert main(["devices"]) == 0
    listed = capsys.readouterr().out
    assert re.search(r"^host +local +this machine", listed, re.M) and "[built-in]" in listed, listed
    assert str(shipped.devices_dir()) not in listed, listed  # no path into the package
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "devices").mkdir()
    for name in ("e\x1b[31mred", "nl\nx"):
        (tmp_path / "devices" / f"{name}.yaml").write_text("transport: {kind: local}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["devices"]) == 1  # the names are refused: INVALID
    out = capsys.readouterr().out
    assert "\x1b" not in out and "e?[31mred" in out and "nl?x" in out, out
    assert all("INVALID" in line for line in out.splitlines() if "[project" in line), out


def test_an_unusable_sdk_prefix_is_one_clear_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ET_HARNESS_SDK", str(tmp_path / "no-such-prefix"))
    assert main(["send", SAMPLE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("et-harness send: ET_HARNESS_SDK: ") and err.count("\n") == 1
    assert "is not a directory" in err and "Traceback" not in err


def test_map_prints_backend_ids_and_keys_escaped(tmp_path, capsys):
    """Names from a map file never reach the terminal raw: escapes, bidi overrides, U+2028."""
    path = tmp_path / "m.yaml"
    path.write_text(
        'backends:\n  "X\\e]0;pwn\\a":\n    - {key: "k\\u202e", value: 1}\n'
        '  "B\\u2028":\n    - {key: x, value: 2}\n'
    )
    assert main(["map", str(path)]) == 0
    out = capsys.readouterr().out
    print(out)
    assert not any(c in out for c in "\x1b\x07\u202e\u2028")
    assert "  'X\\x1b]0;pwn\\x07'\n    [0] 'k\\u202e': int 1\n  'B\\u2028'\n" in out


@contextlib.contextmanager
def _emulated_mcu() -> Iterator[str]:
    """`et-harness emu mcu-emu` running: the serial address it prints; on leaving, it must
    stop cleanly on SIGINT."""
    from prerequisites import require

    require("qemu-system-arm")
    emu = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "emu", "mcu-emu"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert emu.stdout is not None
        lines = [emu.stdout.readline() for _ in range(3)]
        url = re.fullmatch(r"  url: (socket://127\.0\.0\.1:[0-9]+)\n", lines[1])
        assert url is not None, lines
        yield url[1]
    finally:
        emu.send_signal(signal.SIGINT)
        out, _ = emu.communicate(timeout=30)
    assert emu.returncode == 0 and "mcu-emu is down" in out


@pytest.mark.slow
def test_emu_prints_an_mcu_boards_serial_address_that_answers_hello():
    """What a person (or a lab exporter) connects to while `et-harness emu mcu-emu` runs."""
    from harness.channel.serial.connect import connect
    from harness.data.messages import Action, Request
    from harness.session.agent_session import AgentSession
    from harness.transport.serial import SerialSettings

    with _emulated_mcu() as url:
        link = AgentSession(connect(SerialSettings(url=url), name="mcu-emu"))
        try:
            hello = link.request(Request(Action.HELLO))
            assert (hello.action, hello.fact("abi")) == (Action.HELLO, "armv7m")
        finally:
            link.close()


@pytest.mark.slow
def test_send_loads_again_on_a_board_that_kept_its_probes(tmp_path, capsys):
    """A board is not reset between sessions (`et-harness emu`, a real board without a
    reset line): the probes a first send registered are in the next HELLO, and a second
    send still loads through them rather than taking them for the device's real backends.
    The sample's XnnpackBackend, which the board lacks, is never registered as a probe."""
    with _emulated_mcu() as url:
        board = tmp_path / "board.yaml"
        board.write_text(f"transport: {{kind: serial, url: '{url}'}}\nabi: armv7m\n")
        for _ in range(2):
            assert main(["send", SAMPLE, "--device", str(board)]) == 1, capsys.readouterr()
            out = capsys.readouterr().out
            assert out.startswith("load check: 1 difference in 1 backend"), out
            assert "backend ProbeA: ok, 6 options exact" in out
            assert "backend XnnpackBackend: 1 difference (no such backend on the device)" in out


def test_map_judges_the_map_as_send_and_pytest_do(tmp_path, capsys, monkeypatch):
    """The offline check names what a hand-written map gets wrong: a misspelled key and id,
    by the route of --action, and a project's own backend by its devices/backends/ file;
    --strict-options makes them exit 1."""
    from harness.check import option_contracts

    monkeypatch.setattr(option_contracts, "_DECLARED", {})
    (tmp_path / "devices" / "backends").mkdir(parents=True)
    (tmp_path / "devices" / "backends" / "npu.yaml").write_text(
        "backend: NpuBackend\noptions:\n  perf_mode: {type: int, low: 0, high: 3}\n"
    )
    (tmp_path / "typo.yaml").write_text(
        "backends:\n  XnnpackBackend: {workspace_sharing_modee: 1}\n"
        "  XnnpackBakend: {workspace_sharing_mode: 1}\n  NpuBackend: {perf_mode: 4}\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["map", "typo.yaml"]) == 0
    out = capsys.readouterr().out
    assert "typo.yaml: valid, 3 backends" in out
    warned = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert [line.split(":")[1].strip() for line in warned] == [
        "XnnpackBackend",
        "XnnpackBakend",
        "NpuBackend",
    ], out
    assert "(nearest: workspace_sharing_mode); init ignores it" in warned[0]
    assert "NpuBackend reads an int 0..3" in warned[2]
    assert main(["map", "typo.yaml", "--action", "get"]) == 0
    assert "get_option has no value of that name" in capsys.readouterr().out
    assert main(["map", "typo.yaml", "--strict-options"]) == 1
    out = capsys.readouterr().out
    assert "3 options will have no effect (--strict-options makes that a failure)" in out


def test_a_bad_contract_file_stops_map_and_send_in_one_line(tmp_path, capsys, monkeypatch):
    from harness.check import option_contracts

    monkeypatch.setattr(option_contracts, "_DECLARED", {})
    (tmp_path / "devices" / "backends").mkdir(parents=True)
    (tmp_path / "devices" / "backends" / "npu.yaml").write_text("backend: NpuBackend\nopts: {}\n")
    (tmp_path / "m.yaml").write_text("backends: {}\n")
    monkeypatch.chdir(tmp_path)
    for command in (["map", "m.yaml"], ["send", "m.yaml", "--device", "host"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert "devices/backends/npu.yaml: unknown field 'opts'; allowed: backend," in err


def _doctor_rows(out: str) -> dict[str, list[str]]:
    """Each device's row of ``et-harness doctor``'s output, split, and its notes under it."""
    rows: dict[str, list[str]] = {}
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("programs on"))
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            rows[line.split()[0]] = [line]
        elif rows:  # a note, indented to the row's text (the programs come before any row)
            rows[next(reversed(rows))].append(line.strip())
    return rows


def test_doctor_checks_the_projects_devices_and_compares_their_backends(
    capsys, monkeypatch, tmp_path
):
    """Without --device: the project's profiles and host, not the built-in examples; paths
    relative; a backend the profile names and the device lacks fails that device."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    devices = tmp_path / "devices"
    devices.mkdir()
    (devices / "mine.yaml").write_text("transport: {kind: local}\nbackends: [XnnpackBackend]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("checking mine, host: the project's profiles and the default device")
    rows = _doctor_rows(out)
    assert list(rows) == ["mine", "host"], out
    assert rows["mine"][0].split()[1] == "ok" and "XnnpackBackend" in rows["mine"][0]
    assert str(tmp_path) not in out and "pixel8" not in out, out

    (devices / "npu.yaml").write_text(
        "transport: {kind: local}\nbackends: [NpuBackend, XnnpackBackend]\n"
    )
    (devices / "bad.yaml").write_text("transport: {kind: local}\nbackends: 3\n")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    rows = _doctor_rows(out)
    assert list(rows) == ["bad", "mine", "npu", "host"], out
    assert rows["bad"][0].split()[1] == "INVALID" and "devices/bad.yaml: backends" in out, out
    npu, lacking, unnamed = rows["npu"]
    assert npu.split()[1] == "MISMATCH", out
    assert lacking == (
        "devices/npu.yaml: backends: names NpuBackend, which the device does not register; "
        "correct the list, or the device's runtime"
    )
    assert unnamed.startswith("the device also registers ") and "OpenvinoBackend" in unnamed
    assert "XnnpackBackend" not in unnamed and str(tmp_path) not in out, out


def test_doctor_reads_the_projects_option_contracts_as_pytest_does(capsys, monkeypatch, tmp_path):
    """A contract file pytest would stop at fails doctor too (a CI gate that passes while
    every pytest run exits 4 gates nothing); a good one is listed with its file."""
    from harness.check import option_contracts

    monkeypatch.setattr(option_contracts, "_DECLARED", {})
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    contracts = tmp_path / "devices" / "backends"
    contracts.mkdir(parents=True)
    (tmp_path / "devices" / "mine.yaml").write_text("transport: {kind: local}\n")
    (contracts / "npu.yaml").write_text("backend: NpuBackend\noptions: {m: {type: int}}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["doctor"]) == 0
    rows = _doctor_rows(capsys.readouterr().out)
    assert list(rows) == ["backends/", "mine", "host"], rows
    assert rows["backends/"][0].split()[1:] == [
        "ok",
        "option",
        "contracts:",
        "NpuBackend",
        "(devices/backends/npu.yaml)",
    ], rows
    monkeypatch.setattr(option_contracts, "_DECLARED", {})
    (contracts / "npu.yaml").write_text("backend: NpuBackend\noptions: {m: {type: float}}\n")
    assert main(["doctor"]) == 1
    (row,) = _doctor_rows(capsys.readouterr().out)["backends/"]
    assert row.split(None, 2)[1:] == [
        "INVALID",
        "devices/backends/npu.yaml: options.m.type: bool, int or string; got 'float'",
    ], row


def test_doctor_shows_a_built_in_profile_as_built_in(capsys, monkeypatch, tmp_path):
    from harness.profiles.device_folders import built_in

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        "harness.cli.doctor.lab_place",
        lambda profile, wait: (_ for _ in ()).throw(ProfileError(profile.where("transport"))),
    )
    assert main(["doctor", "--device", "lab-mcu"]) == 1
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("lab-")]
    assert "UNAVAILABLE built-in lab-mcu.yaml: transport" in row, row
    assert str(built_in().path) not in row


def test_map_and_send_name_a_shipped_example_map_from_anywhere(capsys, monkeypatch, tmp_path):
    """A name without folder or suffix is one of the harness's example maps (README's
    commands in a project of one's own); another name is one line listing them."""
    monkeypatch.chdir(tmp_path)
    assert main(["map", "sample", "--hex"]) == 0
    assert capsys.readouterr().out.startswith("sample: valid, 3 backends: XnnpackBackend (3)")
    assert main(["map", "broken"]) == 2  # the example of a refused map, found and refused
    assert capsys.readouterr().err.startswith(
        "et-harness map: broken (shipped example): backends.XnnpackBackend[2].value: int "
    )  # by its name: no path into the installed package
    assert main(["map", "sample.yaml"]) == 2  # README's name, with the suffix
    assert capsys.readouterr().err == (
        "et-harness map: sample.yaml: cannot read the file: No such file or directory; the "
        "shipped example goes by its name: sample\n"
    )
    assert main(["send", "samples", "--device", "host"]) == 2
    assert capsys.readouterr().err == (
        "et-harness send: samples: no such shipped example map (broken, sample); give a map "
        "file's path (.yaml, .yml or .json)\n"
    )
    assert main(["send", "sample", "--device", "host", "--action", "set"]) == 0
    assert "backend ProbeA: ok, 6 options exact" in capsys.readouterr().out


def test_lab_quarantine_clear_needs_the_place_and_list_takes_none(capsys):
    assert main(["lab", "quarantine", "clear", "-x", "127.0.0.1:9"]) == 2
    assert "lab quarantine clear needs the place" in capsys.readouterr().err
    assert main(["lab", "quarantine", "list", "lab-b", "-x", "127.0.0.1:9"]) == 2
    assert "list takes no place (clear lab-b clears it)" in capsys.readouterr().err
