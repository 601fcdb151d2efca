"""The MCU agent firmware on a real emulated Cortex-M3 (QEMU mps2-an385), over the framed link.

Each test boots a fresh QEMU (about 30 ms), so registrations never leak between
tests. The firmware ends through semihosting with the status the test asks for.
"""

from __future__ import annotations

import dataclasses
import re
import select
import socket
import struct
import subprocess
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from harness.channel.serial.arq import MessageTooLarge, SerialLink
from harness.channel.serial.connect import connect
from harness.channel.serial.frame import FLAG_END, FLAG_START, Frame, FrameKind, decode_frame
from harness.channel.serial.hello import DeviceHello
from harness.channel.serial.link_config import LinkConfig
from harness.codec import wire
from harness.codec.wire.program_messages import encode_program_data, encode_program_end
from harness.codec.wire.stream_reader import StreamReader, StreamRefusal
from harness.data.messages import (
    ENTRY_FLAG_PROBE,
    Action,
    LoadPath,
    LoadSpec,
    Outcome,
    Report,
    Request,
)
from harness.data.options import Option, OptionsMap, OptionValue
from harness.data.runtime_error import RuntimeErrorCode
from harness.devices.firmware import firmware_session
from harness.emulators.mcu import McuEmulator, firmware_size, firmware_source_hash
from harness.profiles.mcu_boards import McuBoard
from harness.programs.probe_program import probe_program
from harness.runtime.firmware_tree import find_runtime_source
from harness.runtime.wheel_sdk import default_version
from harness.session.agent_session import AgentSession
from harness.session.program_upload import ProgramUploadingSession
from harness.transport.serial import SerialSettings

PROBES = tuple(f"Probe{i}" for i in range(8))


@pytest.fixture
def link(mcu: McuEmulator) -> Iterator[AgentSession]:
    """An agent session over a serial link to the firmware (``link.channel``)."""
    with mcu.connect() as opened:
        yield firmware_session(opened)
        if mcu.poll() is None:
            assert mcu.shutdown(opened, 0) == 0


def ok(report: Report) -> Report:
    assert report.outcome == Outcome.OK, report
    return report


def register(link: AgentSession, names: tuple[str, ...]) -> Report:
    report = ok(link.request(Request.register(names)))
    assert [(e.name, e.status) for e in report.entries] == [(n, 0) for n in names]
    return report


def fact(report: Report, key: str) -> OptionValue:
    value = report.fact(key)
    assert value is not None, f"no fact {key!r} in {report.facts}"
    return value


def int_fact(report: Report, key: str) -> int:
    """A fact that is a number, as sizes and counts are."""
    value = fact(report, key)
    assert isinstance(value, int), f"fact {key!r} is {value!r}, not a number"
    return value


# --------------------------------------------------------------------------- build


SOURCE = find_runtime_source()  # the firmware's runtime is compiled from it when there is one
if SOURCE is not None:
    RUNTIME_FACT = (
        f"ExecuTorch {SOURCE.version} @ {SOURCE.commit}, built from source: Program, Method, "
        "backend and operator registries, PAL; no stand-in"
    )
    CAPABILITIES = "load,execute,set,get,reset,register,hello,reboot,program_upload"
else:
    RUNTIME_FACT = (
        "STAND-IN registry and dispatch (no ExecuTorch source tree: set ET_HARNESS_SOURCE); "
        f"ExecuTorch {default_version()} option types and map"
    )
    CAPABILITIES = "load,execute,set,get,reset,register,hello,reboot"
# Functions of ExecuTorch's own .cpp files that a firmware built from source defines, each
# from the tree (arm-none-eabi-nm -C -l names the file of a definition).
SOURCE_DEFINED = {
    "executorch::runtime::Method::init(": "runtime/executor/method.cpp",
    "executorch::runtime::Program::load(": "runtime/executor/program.cpp",
    "executorch::runtime::register_backend(": "runtime/backend/interface.cpp",
    "executorch::runtime::get_option(": "runtime/backend/interface.cpp",
    "executorch::runtime::set_option(": "runtime/backend/interface.cpp",
}

# Code of the runtime's headers the firmware must contain (arm-none-eabi-nm -C).
RUNTIME_SYMBOLS = (
    (
        "executorch::runtime::LoadBackendOptionsMap::set_options(char const*, "
        "executorch::runtime::Span<executorch::runtime::BackendOption>)"
    ),
    "executorch::runtime::LoadBackendOptionsMap::get_options(char const*) const",
    (
        "executorch::runtime::Result<int> executorch::runtime::BackendInitContext::"
        "get_runtime_spec<int>(char const*) const"
    ),
    (
        "executorch::runtime::Result<char const*> executorch::runtime::BackendInitContext::"
        "get_runtime_spec<char const*>(char const*) const"
    ),
)


def _sections(elf: Path) -> dict[str, int]:
    done = subprocess.run(
        ["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True, check=True
    )
    rows = (line.split() for line in done.stdout.splitlines())
    return {row[0]: int(row[1]) for row in rows if len(row) == 3 and row[0].startswith(".")}


def test_firmware_holds_the_runtime_code_and_no_allocator(firmware: Path) -> None:
    symbols = subprocess.run(
        ["arm-none-eabi-nm", "-C", str(firmware)], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split(maxsplit=2)[-1] for line in symbols.splitlines() if line.strip()}
    assert not names & {
        "malloc",
        "free",
        "calloc",
        "realloc",
        "_sbrk",
        "_malloc_r",
        "__cxa_atexit",
        "__aeabi_atexit",
    }
    assert {"etb_decode_request", "etb_encode_report", "etb_crc32"} <= names  # the codec
    size = firmware_size(firmware)
    sections = _sections(firmware)
    assert sections[".stack"] == 4096
    if SOURCE is None:
        missing = [symbol for symbol in RUNTIME_SYMBOLS if symbol not in names]
        assert not missing, f"the runtime's header code is not in the image: {missing}"
        assert size["text"] < 32 * 1024
        assert sections[".data"] + sections[".bss"] < 24 * 1024  # the rest: options, stack
        return
    located = subprocess.run(
        ["arm-none-eabi-nm", "-C", "-l", "--defined-only", str(firmware)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for prefix, origin in SOURCE_DEFINED.items():
        lines = [line for line in located if f" {prefix}" in line and " T " in line]
        assert lines, f"{prefix} is not defined in the image"
        assert all(f"\t/executorch/{origin}:" in line for line in lines), lines
    assert not [line for line in located if "standin_" in line]  # no stand-in linked
    assert size["text"] < 96 * 1024


@pytest.mark.skipif(SOURCE is None, reason="no ExecuTorch source tree (set ET_HARNESS_SOURCE)")
def test_the_same_tree_in_another_place_is_the_same_build(tmp_path: Path) -> None:
    """The image names the tree's files /executorch/... wherever the tree is (the test
    above), so a tree elsewhere (another checkout, another CI directory) with the same
    files reuses the cached image; one changed file, or another commit (HELLO names it),
    makes another."""
    assert SOURCE is not None
    image = firmware_source_hash("mps2-an385", SOURCE)
    moved = dataclasses.replace(SOURCE, path=tmp_path / "executorch")
    assert firmware_source_hash("mps2-an385", moved) == image
    for changed in (
        dataclasses.replace(SOURCE, digest="0" * len(SOURCE.digest)),
        dataclasses.replace(SOURCE, commit="0" * 40),
    ):
        assert firmware_source_hash("mps2-an385", changed) != image, changed


# --------------------------------------------------------------------------- boot, hello, exit


def test_boot_hello_announces_link_limits(link: AgentSession) -> None:
    assert isinstance(link.channel, SerialLink)  # the fixture's
    boot = link.channel.boot_hello
    assert boot is not None and boot.session == 0
    hello = link.channel.hello
    assert hello.session != 0 and hello.link_version == 1 and hello.wire_version == 2
    assert hello.max_message == 4096 and hello.max_frame == 135 and hello.window == 3
    assert hello.rx_buffer == 1024
    served = [action for action in Action if action != Action.NONE and hello.serves(action)]
    uploads = [Action.PROGRAM_DATA, Action.PROGRAM_END] if SOURCE is not None else []
    assert served == [a for a in Action if Action.NONE < a <= Action.HELLO] + uploads
    assert re.fullmatch(r"0\.1\.0\+[0-9a-f]{12}", hello.firmware_version)


def test_hello_action_reports_device_facts(
    link: AgentSession, mcu_board: McuBoard, firmware: Path
) -> None:
    assert isinstance(link.channel, SerialLink)  # the fixture's
    register(link, ("Alpha", "Beta"))
    report = ok(link.request(Request(Action.HELLO)))
    assert fact(report, "abi") == mcu_board.abi
    assert fact(report, "board") == mcu_board.machine
    assert fact(report, "runtime") == RUNTIME_FACT
    assert fact(report, "wire_version") == 2
    assert fact(report, "max_message") == link.channel.hello.max_message
    assert fact(report, "registry_capacity") == 16
    assert fact(report, "capabilities") == CAPABILITIES
    if SOURCE is not None:  # the image's share of runtime and rest (boards/sections.ld)
        sections = _sections(firmware)
        flash = [int_fact(report, "flash_runtime"), int_fact(report, "flash_rest")]
        ram = [int_fact(report, "ram_runtime"), int_fact(report, "ram_rest")]
        assert flash[0] > 16 * 1024 and ram[0] > 0
        assert sum(flash) == sections[".text"] + sections[".ARM.exidx"] + sections[".data"]
        assert 0 <= sum(ram) - (sections[".data"] + sections[".bss"]) < 16  # alignment
    assert fact(report, "load_paths") == "program"
    assert report.fact("load_flags") == ("keep" if SOURCE is not None else None)
    assert (fact(report, "max_models"), fact(report, "concurrent")) == (8, False)
    assert fact(report, "directives") == "etb.dup:,etb.id_suffix"
    assert fact(report, "agent_version") == link.channel.hello.firmware_version
    assert [(e.name, e.status, e.flags, e.options) for e in report.entries] == [
        ("Alpha", 0, ENTRY_FLAG_PROBE, ()),
        ("Beta", 0, ENTRY_FLAG_PROBE, ()),
    ]


def test_runtime_log_reaches_the_host_through_semihosting(
    mcu: McuEmulator, link: AgentSession
) -> None:
    """ET_LOG goes through the firmware's executorch::runtime::internal::vlogf to QEMU's stderr."""
    per_backend = ok(link.request(Request(Action.HELLO))).fact("options_per_backend")
    assert mcu.wait_for_log("executorch I "), mcu.stderr_tail()
    assert f"{per_backend} options per backend" in mcu.stderr_tail()


@pytest.mark.parametrize("restarted", [False, True], ids=["first-start", "restarted"])
def test_the_boot_hello_is_read_however_late_the_port_opens(
    mcu: McuEmulator, late_port_open: None, restarted: bool
) -> None:
    """The CPU runs only once the port is open, so the boot HELLO cannot be discarded; after a
    restart the first link requires it again (it proves the board restarted)."""
    if restarted:
        mcu.connect(LinkConfig(boot_timeout=5.0)).close()
        mcu.stop()
        mcu.start()
    with mcu.connect(LinkConfig(boot_timeout=5.0)) as link:
        assert link.boot_hello is not None and link.boot_hello.session == 0
        assert mcu.shutdown(link, 0) == 0


def test_exit_frame_ends_qemu_with_the_status_asked_for(mcu: McuEmulator) -> None:
    link = connect(SerialSettings(url=mcu.url), on_open=mcu.run)
    try:
        assert mcu.shutdown(link, 42) == 42
    finally:
        link.close()


def test_idle_firmware_sleeps(mcu: McuEmulator, link: AgentSession, record_property) -> None:
    ok(link.request(Request(Action.HELLO)))
    before, start = mcu.cpu_seconds(), time.monotonic()
    time.sleep(2.0)  # measuring idle CPU needs an idle interval
    used = mcu.cpu_seconds() - before
    share = used / (time.monotonic() - start)
    record_property("qemu_idle_cpu_share", share)
    assert share < 0.03, f"QEMU used {share:.1%} of a core while the firmware was idle"
    ok(link.request(Request(Action.HELLO)))


# --------------------------------------------------------------------------- actions


@pytest.mark.parametrize("count", range(1, 9))
def test_load_hands_each_backend_exactly_its_own_options(link: AgentSession, count: int) -> None:
    register(link, PROBES)
    names = PROBES[:count]
    # What OptionsMap.from_dict takes of a backend: a mapping or a list of (key, value).
    bystander: dict[str, Mapping[str, OptionValue] | Sequence[tuple[str, OptionValue]]] = (
        {PROBES[count]: {"never": True}} if count < len(PROBES) else {}
    )  # registered, no delegate
    delegates: dict[str, Mapping[str, OptionValue] | Sequence[tuple[str, OptionValue]]] = {
        name: [("index", i), ("name", name), ("even", i % 2 == 0), ("pad", "x" * (20 * i))]
        for i, name in enumerate(names)
    }
    options = OptionsMap.from_dict(delegates | bystander)
    report = ok(link.request(Request.load("", names, options)))
    memory = {"program_bytes", "method_allocator_used", "planned_bytes", "temp_allocator_used"}
    assert {f.key for f in report.facts} == {"load_path", "load_us", "execute_us"} | (
        memory if SOURCE is not None else set()
    )
    assert report.fact("load_path") == "program"
    assert [e.name for e in report.entries] == list(names)
    for entry in report.entries:
        expected = options.for_backend(entry.name)
        assert expected is not None
        assert entry.options == expected.options
        assert (entry.status, entry.calls, entry.executes, entry.flags) == (
            0,
            1,
            1,
            ENTRY_FLAG_PROBE,
        )


def test_load_without_entry_gives_empty_specs_and_repeated_delegates_init_twice(
    link: AgentSession,
) -> None:
    register(link, ("A", "B"))
    options = OptionsMap.from_dict({"A": {"k": 1}})
    report = ok(link.request(Request.load("", ("A", "B", "A"), options)))
    assert [(e.name, e.calls, e.executes, e.options) for e in report.entries] == [
        ("A", 2, 2, (Option("k", 1),)),
        ("B", 1, 1, ()),
    ]


def test_load_of_unregistered_delegate_is_not_found(link: AgentSession) -> None:
    register(link, ("A",))
    report = link.request(Request.load("", ("A", "Ghost"), OptionsMap.from_dict({"A": {"k": 1}})))
    assert report.outcome == Outcome.RUNTIME_ERROR
    assert report.detail == RuntimeErrorCode.NotFound
    assert "Ghost" in report.message
    assert [(e.name, e.calls, e.executes) for e in report.entries] == [("A", 1, 0)]
    failed = link.request(Request(Action.EXECUTE))
    assert (failed.outcome, failed.detail) == (Outcome.RUNTIME_ERROR, RuntimeErrorCode.InvalidState)


@pytest.mark.parametrize(
    "path", [p for p in LoadPath if p is not LoadPath.PROGRAM], ids=lambda p: p.label
)
def test_module_load_paths_and_concurrent_loads_are_unsupported_and_nothing_is_initialised(
    link: AgentSession, path: LoadPath
) -> None:
    register(link, ("A",))
    options = OptionsMap.from_dict({"A": {"k": 1}})
    report = link.request(Request.load("", ("A",), options, path=path))
    assert (report.outcome, report.entries) == (Outcome.UNSUPPORTED, ())
    assert "extension::Module needs a file system and a heap" in report.message
    models = (LoadSpec("", ("A",)),)
    threads = link.request(Request.load("", ("A",), OptionsMap(), models=models, concurrent=True))
    assert (threads.outcome, threads.entries) == (Outcome.UNSUPPORTED, ())
    assert "no threads" in threads.message
    ok(link.request(Request.load("", ("A",), OptionsMap(), method="forward")))


def test_several_models_load_one_after_another_each_with_its_own_map(link: AgentSession) -> None:
    """wire-format.md, LOAD "models": each model its own program instance and map; a failing
    model is reported as its own; EXECUTE runs every model the LOAD loaded."""
    register(link, ("A", "B"))
    maps = [
        OptionsMap.from_dict({b: {"model": n, "who": f"{b} {n}"} for b in d})
        for n, d in enumerate((("A", "B"), ("B",), ("A",)))
    ]
    further = (
        LoadSpec("", ("B",), maps[1]),
        LoadSpec("", ("A",), maps[2]),
        LoadSpec("", ("Ghost",)),
    )
    report = link.request(Request.load("", ("A", "B"), maps[0], models=further))
    assert (report.outcome, report.detail) == (Outcome.RUNTIME_ERROR, RuntimeErrorCode.NotFound)
    assert report.message.startswith('model 3: delegate "Ghost" has no registered backend')
    assert report.fact("models") == 4
    assert [(e.model, e.name, e.calls, e.executes, e.options) for e in report.entries] == [
        (0, "A", 1, 1, maps[0].backends[0].options),
        (0, "B", 1, 1, maps[0].backends[1].options),
        (1, "B", 1, 1, maps[1].backends[0].options),
        (2, "A", 1, 1, maps[2].backends[0].options),
    ]
    again = link.request(Request(Action.EXECUTE))
    assert (again.outcome, again.detail) == (Outcome.RUNTIME_ERROR, RuntimeErrorCode.InvalidState)
    assert again.message.startswith("model 3: no method loaded")
    assert [(e.model, e.name, e.calls, e.executes) for e in again.entries] == [
        (0, "A", 0, 1),
        (0, "B", 0, 1),
        (1, "B", 0, 1),
        (2, "A", 0, 1),
    ]


@pytest.mark.skipif(SOURCE is None, reason="KEEP needs a program: firmware built from source")
def test_keep_loads_another_method_into_the_loaded_program(link: AgentSession) -> None:
    """KEEP as wire-format.md decides: nothing loaded is InvalidState; `second` gets its own
    map and is what EXECUTE runs; a KEEP naming another program is InvalidArgument and
    unloads nothing."""
    register(link, ("A", "B"))
    none = link.request(Request.load("", ("A", "B"), OptionsMap(), keep=True, method="second"))
    assert (none.outcome, none.detail, none.entries) == (
        Outcome.RUNTIME_ERROR,
        RuntimeErrorCode.InvalidState,
        (),
    )
    first = OptionsMap.from_dict({"A": {"k": 1}})
    ok(link.request(Request.load("", ("A", "B"), first)))
    second = OptionsMap.from_dict({"B": {"k": 2}, "A": {"s": "second"}})
    kept = ok(link.request(Request.load("", ("A", "B"), second, keep=True, method="second")))
    assert [(e.name, e.calls, e.executes, e.options) for e in kept.entries] == [
        ("A", 1, 1, (Option("s", "second"),)),
        ("B", 1, 1, (Option("k", 2),)),
    ]
    assert int_fact(kept, "method_allocator_used") > 0
    again = ok(link.request(Request.load("", ("A", "B"), first, keep=True, method="second")))
    assert [(e.name, e.calls, e.executes) for e in again.entries] == [("A", 0, 1), ("B", 0, 1)]
    other = link.request(Request.load("", ("B", "A"), first, keep=True, method="second"))
    assert (other.outcome, other.detail, other.entries) == (
        Outcome.RUNTIME_ERROR,
        RuntimeErrorCode.InvalidArgument,
        (),
    )
    assert "KEEP names another program than the loaded one" in other.message
    runs = ok(link.request(Request(Action.EXECUTE)))
    assert [(e.name, e.executes) for e in runs.entries] == [("A", 1), ("B", 1)]
    third = link.request(Request.load("", ("A", "B"), first, keep=True, method="no_such"))
    assert (third.outcome, third.entries) == (Outcome.RUNTIME_ERROR, ())


@pytest.mark.skipif(SOURCE is None, reason="programs are held by firmware built from source")
def test_a_held_program_the_next_upload_replaces_is_uploaded_again_before_the_load(
    link: AgentSession,
) -> None:
    """Every slot holds a program; a LOAD naming the oldest and a new one: the new one's
    upload replaces the oldest, so the session uploads it again and the LOAD runs both."""
    assert isinstance(link, ProgramUploadingSession)
    arenas = fact(ok(link.request(Request(Action.HELLO))), "arenas")
    found = re.match(r"programs (\d+) x", str(arenas))
    assert found, arenas
    names = [f"S{i}" for i in range(int(found.group(1)) + 1)]
    register(link, tuple(names))
    for name in names[:-1]:
        link.upload((name,))
    sent = link.upload_messages
    models = (LoadSpec("", (names[-1],), OptionsMap.from_dict({names[-1]: {"m": 1}})),)
    report = ok(link.request(Request.load("", (names[0],), OptionsMap(), models=models)))
    assert [(e.model, e.name) for e in report.entries] == [(0, names[0]), (1, names[-1])]
    assert link.upload_messages - sent == 4  # the new program and the oldest again, 2 each


@pytest.mark.skipif(SOURCE is None, reason="programs are held by firmware built from source")
def test_an_upload_replaces_the_least_recently_used_program_never_one_under_a_method(
    link: AgentSession,
) -> None:
    """The program slots (HELLO arenas): a LOAD names a held program by its CRC-32; an upload
    takes the least recently used slot, unloading first the models whose program it is."""
    assert isinstance(link, ProgramUploadingSession)
    hello = ok(link.request(Request(Action.HELLO)))
    found = re.match(r"programs (\d+) x (\d+) B, method \d+ B", str(fact(hello, "arenas")))
    assert found, hello.fact("arenas")
    slots = int(found.group(1))
    names = [f"S{i}" for i in range(slots + 1)]
    register(link, tuple(names))
    ok(link.request(Request.load("", (names[0],), OptionsMap())))  # pins S0's program
    held = [link.upload((name,)) for name in names[1:slots]]
    assert link.request(Request(Action.EXECUTE)).outcome is Outcome.OK  # all slots full now
    link.upload((names[slots],))  # replaces S0's program, the least recently used
    assert link.request(Request(Action.EXECUTE)).detail == RuntimeErrorCode.InvalidState
    report = link.request(Request.load(held[0], (names[1],), OptionsMap()))  # still held
    assert report.outcome is Outcome.OK, report
    gone = f"{zlib.crc32(probe_program((names[0],), min_count=0).read_bytes()):08x}"
    lost = link.request(Request.load(gone, (names[0],), OptionsMap()))
    assert (lost.outcome, lost.detail) == (Outcome.RUNTIME_ERROR, RuntimeErrorCode.AccessFailed)
    assert "not held on this board" in lost.message


def test_execute_runs_the_loaded_method_again(link: AgentSession) -> None:
    register(link, ("A", "B"))
    ok(link.request(Request.load("", ("B", "A"), OptionsMap.from_dict({"A": {"k": 1}}))))
    report = ok(link.request(Request(Action.EXECUTE)))
    assert [(e.name, e.calls, e.executes, e.options) for e in report.entries] == [
        ("B", 0, 1, ()),
        ("A", 0, 1, ()),
    ]
    assert isinstance(report.fact("execute_us"), int)


def test_set_then_get_round_trips_and_unknown_names_are_not_found(link: AgentSession) -> None:
    register(link, ("A", "B"))
    settings = OptionsMap.from_dict(
        {"A": {"threads": 4, "mode": "perf"}, "Nobody": {"x": 1}, "B": {"on": True}}
    )
    report = ok(link.request(Request(Action.SET, settings)))
    assert [(e.name, e.status, e.calls, e.flags, e.options) for e in report.entries] == [
        ("A", 0, 1, ENTRY_FLAG_PROBE, (Option("threads", 4), Option("mode", "perf"))),
        ("Nobody", RuntimeErrorCode.NotFound, 0, 0, ()),
        ("B", 0, 1, ENTRY_FLAG_PROBE, (Option("on", True),)),
    ]
    wanted = OptionsMap.from_dict(
        {"A": {"threads": 0, "mode": "", "unset": 7}, "B": {"on": False}, "Nobody": {"x": 0}}
    )
    got = ok(link.request(Request(Action.GET, wanted)))
    assert [(e.name, e.status, e.options) for e in got.entries] == [
        ("A", 0, (Option("threads", 4), Option("mode", "perf"), Option("unset", 7))),
        ("B", 0, (Option("on", True),)),
        ("Nobody", RuntimeErrorCode.NotFound, (Option("x", 0),)),
    ]


def test_reset_forgets_program_and_settings_but_not_registrations(link: AgentSession) -> None:
    register(link, ("A",))
    ok(link.request(Request(Action.SET, OptionsMap.from_dict({"A": {"k": 5}}))))
    ok(link.request(Request.load("", ("A",), OptionsMap())))
    assert ok(link.request(Request(Action.RESET))).entries == ()
    got = ok(link.request(Request(Action.GET, OptionsMap.from_dict({"A": {"k": 0}}))))
    assert got.entries[0].options == (Option("k", 0),)
    assert link.request(Request(Action.EXECUTE)).detail == RuntimeErrorCode.InvalidState
    assert [e.name for e in ok(link.request(Request(Action.HELLO))).entries] == ["A"]


def test_registry_rejects_duplicates_and_is_full_at_sixteen(link: AgentSession) -> None:
    names = tuple(f"R{i:02d}" for i in range(16))
    register(link, names[:10])
    report = ok(link.request(Request.register(("R03", *names[10:], "Extra"))))
    assert [(e.name, e.status) for e in report.entries] == [
        ("R03", RuntimeErrorCode.InvalidArgument),
        *[(n, 0) for n in names[10:]],
        ("Extra", RuntimeErrorCode.Internal),
    ]
    assert [e.name for e in ok(link.request(Request(Action.HELLO))).entries] == list(names)
    # The runtime checks "full" before "duplicate": a known name now gets Internal too.
    again = ok(link.request(Request.register(("R00",))))
    assert [(e.name, e.status) for e in again.entries] == [("R00", RuntimeErrorCode.Internal)]
    unknown = ok(link.request(Request(Action.SET, OptionsMap.from_dict({"Extra": {"k": 1}}))))
    assert unknown.entries[0].status == RuntimeErrorCode.NotFound


# --------------------------------------------------------------------------- capacity


def capacity(link: AgentSession) -> tuple[int, int, int]:
    """options_per_backend, backends_per_map and options_per_request from HELLO."""
    hello = ok(link.request(Request(Action.HELLO)))
    per_backend, per_map, per_request = (
        fact(hello, k) for k in ("options_per_backend", "backends_per_map", "options_per_request")
    )
    assert isinstance(per_backend, int) and isinstance(per_map, int)
    assert isinstance(per_request, int)
    return per_backend, per_map, per_request


def full_map(names: tuple[str, ...], count: int, *, checked: bool = True) -> OptionsMap:
    """``count`` bool options (two-byte keys: a full 8 x 64 map fits max_message) per name."""
    return OptionsMap.from_dict(
        {n: {f"{i:02d}": i % 2 == 0 for i in range(count)} for n in names}, checked=checked
    )


def test_hello_announces_the_capacity_its_ram_holds(
    link: AgentSession, mcu_board: McuBoard
) -> None:
    hello = ok(link.request(Request(Action.HELLO)))
    assert fact(hello, "backend_option_bytes") == 324  # sizeof(BackendOption) on Cortex-M
    per_backend, per_map, per_request = capacity(link)
    assert per_map == 8 and per_request == per_map * per_backend
    arena = fact(hello, "option_arena_bytes")
    assert isinstance(arena, int)
    # Four arrays of per_request options: BackendOption, two views, a kept BackendOption.
    assert per_request * (2 * 324) <= arena
    if mcu_board.machine == "mps3-an547":
        assert per_backend == 64  # 512 KiB DTCM: the wire format's full 8 x 64
    else:
        assert 8 <= per_backend < 64  # 128 KiB: 8 x 64 BackendOptions alone need 166 KB


def test_a_map_at_full_capacity_is_delivered_exactly(link: AgentSession) -> None:
    per_backend, per_map, _ = capacity(link)
    names = PROBES[:per_map]
    register(link, names)
    options = full_map(names, per_backend)
    report = ok(link.request(Request.load("", names, options)))
    assert [(e.name, e.options) for e in report.entries] == [
        (b.backend_id, b.options) for b in options.backends
    ]
    assert [e.options for e in ok(link.request(Request(Action.SET, options))).entries] == [
        b.options for b in options.backends
    ]


def test_one_option_beyond_capacity_is_refused_clearly(link: AgentSession) -> None:
    per_backend, _, _ = capacity(link)
    register(link, ("A",))
    over = full_map(("A",), per_backend + 1, checked=False)
    for action in (Action.LOAD, Action.SET):
        request = Request(action, over, "", ("A",) if action is Action.LOAD else ())
        report = link.request(request)
        assert report.outcome == Outcome.REJECTED and report.entries == ()
        if per_backend < 64:
            assert report.detail == wire.WireErrorCode.CAPACITY
            assert f"at most {per_backend} per backend" in report.message
            assert "options_per_backend" in report.message
        else:  # the device holds the wire format's limit: the codec refuses the 65th
            assert report.detail == wire.WireErrorCode.TOO_MANY_OPTIONS
    ok(link.request(Request(Action.SET, full_map(("A",), per_backend))))


def test_a_request_beyond_the_options_ram_holds_is_refused_clearly(link: AgentSession) -> None:
    per_backend, per_map, per_request = capacity(link)
    names = tuple(f"S{i:02d}" for i in range(per_map + 1))  # SET takes up to 16 backends
    register(link, names)
    counts = [per_backend] * per_map + [1]
    options = OptionsMap.from_dict(
        {n: {f"{i:02d}": False for i in range(c)} for n, c in zip(names, counts, strict=True)},
        checked=False,  # a SET may name more backends than a load-time map holds
    )
    assert sum(counts) == per_request + 1
    report = link.request(Request(Action.SET, options))
    assert (report.outcome, report.detail) == (Outcome.REJECTED, wire.WireErrorCode.CAPACITY)
    assert f"the {per_request} BackendOptions" in report.message
    ok(link.request(Request(Action.HELLO)))


# --------------------------------------------------------------------------- malformed requests


def _tamper(link: AgentSession, offset: int, value: int) -> bytes:
    good = wire.encode_request(dataclasses.replace(Request(Action.HELLO), seq=link.next_seq()))
    frame = bytearray(good)
    frame[offset] = value
    return wire.seal(bytes(frame[:-4])) if offset < len(frame) - 4 else bytes(frame)


def _malformed(link: AgentSession) -> list[tuple[str, bytes]]:
    load = Request.load("", ("A",), OptionsMap.from_dict({"A": {"key": 1}}))
    good_load = wire.encode_request(dataclasses.replace(load, seq=link.next_seq()))
    key_offset = good_load.index(b"key")
    bad_tag = bytearray(good_load[:-4])
    bad_tag[key_offset + 3] = 9
    nine_delegates = Request(
        Action.LOAD, OptionsMap.unchecked(()), "", tuple(f"D{i}" for i in range(9)), link.next_seq()
    )
    return [
        ("bad magic", _tamper(link, 0, ord("X"))),
        ("version 1", _tamper(link, 4, 1)),
        ("report type", _tamper(link, 5, 2)),
        ("crc", _tamper(link, 22, 0xFF)),
        ("unknown action", _tamper(link, 16, 0x42)),
        ("truncated", good_load[:10]),
        ("trailing", good_load + b"\x01"),
        ("bad tag", wire.seal(bytes(bad_tag))),
        ("nine delegates", wire.encode_request(nine_delegates)),
    ]


def test_malformed_requests_are_rejected_and_the_firmware_keeps_serving(link: AgentSession) -> None:
    for name, frame in _malformed(link):
        try:
            wire.decode_request(frame)
        except wire.WireError as exc:
            expected = exc.code
        else:
            pytest.fail(f"{name}: the Python decoder accepted the frame")
        report = link.send_raw(frame)
        assert (report.action, report.outcome, report.detail) == (
            Action.NONE,
            Outcome.REJECTED,
            expected,
        ), name
        assert expected.name in report.message
        if expected == wire.WireErrorCode.VERSION:
            assert "version 1, this firmware speaks version 2" in report.message
        ok(link.request(Request(Action.HELLO)))


def test_too_large_message_is_refused_before_sending(link: AgentSession) -> None:
    huge = OptionsMap.from_dict({"A": {f"k{i}": "v" * 255 for i in range(20)}})
    with pytest.raises(MessageTooLarge, match="max_message"):
        link.request(Request(Action.SET, huge))
    ok(link.request(Request(Action.HELLO)))


def test_resent_request_is_answered_from_cache_not_executed_twice(link: AgentSession) -> None:
    registration = dataclasses.replace(Request.register(("Once",)), seq=link.next_seq())
    frame = wire.encode_request(registration)
    first = link.send_raw(frame)
    again = link.send_raw(frame)  # the same bytes and seq: a retransmission
    assert first == again and first.entries[0].status == 0
    hello = ok(link.request(Request(Action.HELLO)))
    assert [e.name for e in hello.entries] == ["Once"]
    assert fact(hello, "link_replays") == 1
    fresh = link.request(Request.register(("Once",)))  # a new request: executed
    assert fresh.entries[0].status == RuntimeErrorCode.InvalidArgument


def test_a_reused_seq_is_a_new_request_unless_the_bytes_are_the_same(link: AgentSession) -> None:
    """Retransmission is told by the request's own CRC field, not the CRC-32 of the whole
    message (the same residue for every valid message): two different requests with one
    seq and one length are each answered as themselves, a true resend from the cache."""
    register(link, ("A",))

    def framed(request: Request, seq: int) -> bytes:
        return wire.encode_request(dataclasses.replace(request, seq=seq))

    seq = link.next_seq()
    hello_frame = framed(Request(Action.HELLO), seq)
    reset_frame = framed(Request(Action.RESET), seq)
    assert len(hello_frame) == len(reset_frame)
    assert ok(link.send_raw(hello_frame)).action == Action.HELLO
    assert ok(link.send_raw(reset_frame)).action == Action.RESET
    seq = link.next_seq()
    set_frame = framed(Request(Action.SET, OptionsMap.from_dict({"A": {"k": 5}})), seq)
    get_frame = framed(Request(Action.GET, OptionsMap.from_dict({"A": {"k": 0}})), seq)
    assert len(set_frame) == len(get_frame)
    assert ok(link.send_raw(set_frame)).action == Action.SET
    got = ok(link.send_raw(get_frame))
    assert got.action == Action.GET
    assert got.entries[0].options == OptionsMap.from_dict({"A": {"k": 5}}).backends[0].options
    assert link.send_raw(get_frame) == got  # the same bytes and seq: a retransmission
    assert fact(ok(link.request(Request(Action.HELLO))), "link_replays") == 1


def test_multi_frame_requests_and_reports(link: AgentSession) -> None:
    assert isinstance(link.channel, SerialLink)  # the fixture's
    names = tuple(f"Big{i}" for i in range(4))
    register(link, names)
    options = OptionsMap.from_dict({n: {f"key{k}": "s" * 60 for k in range(12)} for n in names})
    request = Request(Action.SET, options)
    assert len(wire.encode_request(request)) > 8 * link.channel.hello.max_frame
    report = ok(link.request(request))
    assert [e.options for e in report.entries] == [b.options for b in options.backends]
    assert fact(ok(link.request(Request(Action.HELLO))), "rx_overruns") == 0


# --------------------------------------------------------------------------- a device-path port


def test_link_over_a_pty_device_path(firmware: Path, mcu_board: McuBoard) -> None:
    """QEMU's UART on a pseudo-terminal: the port is opened as a device path, like a real board."""
    argv = McuEmulator(firmware, machine=mcu_board.machine).argv(0)
    argv[argv.index("-serial") + 1] = "pty"
    argv.remove("-S")  # nothing else here to let the CPU run: the handshake needs no boot HELLO
    argv[argv.index("-monitor") + 1] = "none"
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 10.0)
        line = process.stdout.readline().decode() if ready else ""
        match = re.search(r"(/dev/pts/\d+)", line)
        assert match, f"QEMU did not name its pty within 10 s: {line!r}"
        with connect(SerialSettings(url=match.group(1), baudrate=115200)) as link:
            hello = ok(AgentSession(link).request(Request(Action.HELLO)))
            assert hello.fact("abi") == mcu_board.abi
            link.exit_device(5)
            assert process.wait(5) == 5
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


# ----------------------------------------------------------------- the link, frame by frame


class RawLink:
    """A scripted host speaking frames directly, to check the firmware's link rules."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("socket://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5.0)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pending = b""

    def send(self, frame: Frame) -> None:
        self.sock.sendall(frame.encode())

    def receive(self, timeout: float = 2.0) -> Frame | None:
        """The next valid frame, or None if none comes within ``timeout``."""
        self.sock.settimeout(timeout)
        while b"\0" not in self.pending:
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                return None
            assert chunk, "QEMU closed the connection"
            self.pending += chunk
        encoded, _, self.pending = self.pending.partition(b"\0")
        return decode_frame(encoded) if encoded else self.receive(timeout)

    def handshake(self) -> DeviceHello:
        """HELLO_REQUEST every 0.25 s until a HELLO answers it, as the spec has the host do
        (a request that arrives while the firmware is still booting is not heard). Each
        request has a new session number and only the answer to the latest is taken: the
        device answers in order, so no HELLO can follow it."""
        deadline = time.monotonic() + 5.0
        session = 76
        while time.monotonic() < deadline:
            session += 1
            self.send(Frame(FrameKind.HELLO_REQUEST, 0, 0, struct.pack("<I", session)))
            while (frame := self.receive(timeout=0.25)) is not None:
                if frame.kind == FrameKind.HELLO:
                    hello = DeviceHello.parse(frame.payload)
                    if hello.session == session:
                        return hello
        pytest.fail("no HELLO answered the HELLO_REQUESTs within 5 s")

    def report(self) -> Report:
        """Collect (and acknowledge) the DATA frames of one report."""
        message = b""
        while (frame := self.receive()) is not None:
            if frame.kind != FrameKind.DATA:
                continue
            message += frame.payload
            self.send(Frame(FrameKind.ACK, frame.seq + 1))
            if frame.flags & FLAG_END:
                return wire.decode_report(message)
        pytest.fail("the report did not arrive")


def _one_frame_request(seq: int, link_seq: int) -> Frame:
    message = wire.encode_request(dataclasses.replace(Request(Action.HELLO), seq=seq))
    return Frame(FrameKind.DATA, link_seq, FLAG_START | FLAG_END, message)


def test_firmware_link_rules_frame_by_frame(mcu: McuEmulator) -> None:
    raw = RawLink(mcu.url)
    mcu.run()
    assert raw.handshake().window == 3
    raw.send(_one_frame_request(9, 1))  # ahead of 0: a gap
    assert raw.receive() == Frame(FrameKind.NAK, 0)
    raw.send(_one_frame_request(9, 2))  # the same gap: no second NAK
    raw.sock.sendall(b"\x13\x37garbage\x00")  # garbage: a damaged frame, already NAKed
    raw.send(_one_frame_request(9, 0))
    assert raw.receive() == Frame(FrameKind.ACK, 1)
    first = raw.report()
    assert first.seq == 9 and first.fact("requests_handled") == 1
    raw.send(_one_frame_request(9, 0))  # resent frame whose ACK was "lost"
    assert raw.receive() == Frame(FrameKind.ACK, 1)
    raw.send(_one_frame_request(10, 1))
    assert raw.receive() == Frame(FrameKind.ACK, 2)
    second = raw.report()
    assert second.seq == 10 and second.fact("requests_handled") == 2  # the duplicate never ran
    assert second.fact("link_duplicates") == 1


@pytest.mark.parametrize(
    ("magic", "version", "msg_type", "stream_error"),
    [
        (b"ETBO", wire.WIRE_VERSION, 1, wire.WireErrorCode.LENGTH),
        (b"ETBO", 1, 1, wire.WireErrorCode.VERSION),
        (b"ETBO", wire.WIRE_VERSION, 2, wire.WireErrorCode.MSG_TYPE),
        (b"XXXX", wire.WIRE_VERSION, 1, wire.WireErrorCode.BAD_MAGIC),
    ],
    ids=["valid_header", "version_1", "report_type", "bad_magic"],
)
def test_firmware_refuses_a_message_longer_than_max_message(
    mcu: McuEmulator, magic: bytes, version: int, msg_type: int, stream_error: wire.WireErrorCode
) -> None:
    """A link message over max_message is LENGTH, its header unread, where a stream reader
    answers the header's error (wire-format.md, "Framed links")."""
    raw = RawLink(mcu.url)
    mcu.run()
    hello = raw.handshake()
    size = hello.max_message + 200
    header = struct.pack("<4sBBHII", magic, version, msg_type, 0, size, 31)
    message = header + bytes(size - len(header))
    (unit,) = StreamReader(wire.MessageType.REQUEST, hello.max_message).feed(message)[:1]
    assert isinstance(unit, StreamRefusal) and unit.error.code == stream_error
    size = hello.max_frame - 7
    chunks = [message[i : i + size] for i in range(0, len(message), size)]
    for number, chunk in enumerate(chunks):
        flags = (FLAG_START if number == 0 else 0) | (FLAG_END if number == len(chunks) - 1 else 0)
        raw.send(Frame(FrameKind.DATA, number, flags, chunk))
        assert raw.receive() == Frame(FrameKind.ACK, (number + 1) & 0xFF)
    report = raw.report()
    assert (report.seq, report.outcome, report.detail) == (
        31,
        Outcome.REJECTED,
        wire.WireErrorCode.LENGTH,
    )


def test_the_python_example_of_mcu_md_runs() -> None:
    """docs/mcu.md's example, as a reader pastes it: boots the board, prints its HELLO
    and makes QEMU exit with 0."""
    import sys

    docs = Path(__file__).resolve().parents[2] / "docs" / "mcu.md"
    example = re.search(r"```python\n(.*?)```", docs.read_text(encoding="utf-8"), re.S)
    assert example is not None, "docs/mcu.md has no Python example"
    ran = subprocess.run(
        [sys.executable, "-c", example[1]], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("Report(action=<Action.HELLO: 7>, outcome=<Outcome.OK: 0>")


# --------------------------------------------------------------------------- program upload


@pytest.mark.skipif(SOURCE is None, reason="uploads are served by firmware built from source")
def test_program_upload_refusals_drop_the_upload_and_a_good_one_is_held(
    link: AgentSession,
) -> None:
    """PROGRAM_DATA/PROGRAM_END (docs/wire-format.md, "Program upload"): out-of-order
    offsets, a wrong size, a wrong CRC and a program over max_program are refused."""
    program = probe_program(("Probe0",)).read_bytes()
    limit = fact(ok(link.request(Request(Action.HELLO))), "max_program")
    assert isinstance(limit, int) and len(program) < limit

    def send(message: bytes) -> Report:
        return link.send_raw(message)

    def refused(report: Report, code: wire.WireErrorCode) -> None:
        assert (report.outcome, report.action, report.detail) == (
            Outcome.REJECTED,
            Action.NONE,
            code,
        ), report

    half = len(program) // 2
    ok(send(encode_program_data(link.next_seq(), 0, program[:half])))
    refused(
        send(encode_program_data(link.next_seq(), half + 1, program[half:])),
        wire.WireErrorCode.UNEXPECTED_FIELD,
    )
    ok(send(encode_program_data(link.next_seq(), 0, program[:half])))
    ok(send(encode_program_data(link.next_seq(), half, program[half:])))
    refused(send(encode_program_end(link.next_seq(), program + b"x")), wire.WireErrorCode.LENGTH)
    ok(send(encode_program_data(link.next_seq(), 0, program)))
    refused(send(encode_program_end(link.next_seq(), bytes(len(program)))), wire.WireErrorCode.CRC)
    chunk = bytes(1024)
    for offset in range(0, limit, len(chunk)):
        ok(send(encode_program_data(link.next_seq(), offset, chunk)))
    refused(send(encode_program_data(link.next_seq(), limit, b"\0")), wire.WireErrorCode.CAPACITY)
    ok(send(encode_program_data(link.next_seq(), 0, program)))
    held = ok(send(encode_program_end(link.next_seq(), program)))
    assert (held.action, held.fact("program_bytes")) == (Action.PROGRAM_END, len(program))
    assert held.fact("programs_held") == f"{zlib.crc32(program):08x}"


@pytest.mark.skipif(SOURCE is None, reason="uploads are served by firmware built from source")
def test_the_upload_rules_in_their_order_and_a_restarted_upload_keeps_its_slot(
    link: AgentSession,
) -> None:
    """docs/wire-format.md, "Order of the upload rules": a chunk out of order that would
    also cross max_program is UNEXPECTED_FIELD (offset before size); a chunk at offset 0
    during an upload starts again in the slot that upload took, so a restarted upload
    drops no other held program."""
    assert isinstance(link, ProgramUploadingSession)
    hello = ok(link.request(Request(Action.HELLO)))
    limit = fact(hello, "max_program")
    found = re.match(r"programs (\d+) x", str(fact(hello, "arenas")))
    assert isinstance(limit, int) and found, hello
    chunk = bytes(1024)
    for offset in range(0, limit - len(chunk) + 1, len(chunk)):
        ok(link.send_raw(encode_program_data(link.next_seq(), offset, chunk)))
    end = limit - limit % len(chunk)
    crossing = encode_program_data(link.next_seq(), end + 1, bytes(limit - end + 1))
    wrong = link.send_raw(crossing)
    assert (wrong.outcome, wrong.detail) == (Outcome.REJECTED, wire.WireErrorCode.UNEXPECTED_FIELD)
    # Every slot holds one of this test's programs, then two uploads start at offset 0.
    slots = int(found.group(1))
    names = [link.upload((f"R{i}",)) for i in range(slots)]
    first = probe_program(("X",), min_count=0).read_bytes()
    ok(link.send_raw(encode_program_data(link.next_seq(), 0, first[:100])))  # R0's slot
    again = probe_program(("Y",), min_count=0).read_bytes()
    ok(link.send_raw(encode_program_data(link.next_seq(), 0, again)))
    held = ok(link.send_raw(encode_program_end(link.next_seq(), again)))
    listed = str(held.fact("programs_held")).split(",")
    assert sorted(listed) == sorted([*names[1:], f"{zlib.crc32(again):08x}"]), listed


@pytest.mark.skipif(SOURCE is None, reason="uploads are served by firmware built from source")
def test_a_new_sessions_handshake_keeps_the_upload_under_way(mcu: McuEmulator) -> None:
    """docs/wire-format.md, "Refusals": a serial link's handshake is not a request; the
    upload a link began goes on over the next link, a new session number's."""
    program = probe_program(("H",), min_count=0).read_bytes()
    half = len(program) // 2
    with mcu.connect() as opened:
        first = firmware_session(opened)
        ok(first.send_raw(encode_program_data(first.next_seq(), 0, program[:half])))
    with mcu.connect() as opened:
        second = firmware_session(opened)
        ok(second.send_raw(encode_program_data(second.next_seq(), half, program[half:])))
        held = ok(second.send_raw(encode_program_end(second.next_seq(), program)))
        assert f"{zlib.crc32(program):08x}" in str(held.fact("programs_held"))
        assert mcu.shutdown(opened, 0) == 0


def _refused_chunks(seq: int, offset: int, chunk: bytes) -> dict[wire.WireErrorCode, bytes]:
    """The chunk ``chunk`` at ``offset`` refused each way a device refuses a PROGRAM_DATA:
    out of order, its body ending before its bytes, a byte after them, a wrong message CRC."""
    good = encode_program_data(seq, offset, chunk)
    length_at = wire.HEADER_SIZE + 1 + 4  # header, action, offset: the chunk's u16 length
    longer = bytearray(good[:-4])
    struct.pack_into("<H", longer, length_at, len(chunk) + 1)
    damaged = bytearray(good)
    damaged[-1] ^= 0xFF
    return {
        wire.WireErrorCode.UNEXPECTED_FIELD: encode_program_data(seq, offset + 1, chunk),
        wire.WireErrorCode.TRUNCATED: wire.seal(bytes(longer)),
        wire.WireErrorCode.TRAILING: wire.seal(good[:-4] + b"\0"),
        wire.WireErrorCode.CRC: bytes(damaged),
    }


@pytest.mark.skipif(SOURCE is None, reason="uploads are served by firmware built from source")
@pytest.mark.parametrize(
    "code",
    [
        wire.WireErrorCode.UNEXPECTED_FIELD,
        wire.WireErrorCode.TRUNCATED,
        wire.WireErrorCode.TRAILING,
        wire.WireErrorCode.CRC,
    ],
    ids=lambda code: code.name,
)
def test_a_refused_chunk_drops_the_upload_under_way(
    link: AgentSession, code: wire.WireErrorCode
) -> None:
    """Program upload: a refusal drops the upload under way. After a chunk refused
    ``code``, neither a PROGRAM_END nor the chunk at the old end continues the upload,
    nothing is held, and an upload from offset 0 then works."""
    program = probe_program(("Probe0",)).read_bytes()
    half = len(program) // 2

    def send(message: bytes) -> Report:
        return link.send_raw(message)

    def refused(report: Report, expected: wire.WireErrorCode, why: str) -> None:
        assert (report.outcome, report.action, report.detail) == (
            Outcome.REJECTED,
            Action.NONE,
            expected,
        ), f"{why}: {report}"
        assert report.fact("programs_held") in (None, ""), f"{why}: {report}"

    for then in ("PROGRAM_END", "the chunk at the old end"):
        why = f"after a chunk refused {code.name}, {then}"
        ok(send(encode_program_data(link.next_seq(), 0, program[:half])))
        bad = _refused_chunks(link.next_seq(), half, program[half:])[code]
        refused(send(bad), code, f"the chunk refused {code.name}")
        if then == "PROGRAM_END":
            end = encode_program_end(link.next_seq(), program[:half])
            refused(send(end), wire.WireErrorCode.LENGTH, why)
        else:
            chunk = encode_program_data(link.next_seq(), half, program[half:])
            refused(send(chunk), wire.WireErrorCode.UNEXPECTED_FIELD, why)
            end = encode_program_end(link.next_seq(), program)
            refused(send(end), wire.WireErrorCode.LENGTH, f"{why}, then PROGRAM_END")
    ok(send(encode_program_data(link.next_seq(), 0, program[:half])))
    ok(send(encode_program_data(link.next_seq(), half, program[half:])))
    held = ok(send(encode_program_end(link.next_seq(), program)))
    assert held.fact("programs_held") == f"{zlib.crc32(program):08x}"
    register(link, ("Probe0",))
    loaded = link.send_raw(
        wire.encode_request(
            dataclasses.replace(Request.load("", ("Probe0",), OptionsMap()), seq=link.next_seq())
        )
    )
    assert [e.name for e in ok(loaded).entries] == ["Probe0"]


# --------------------------------------------------------------------------- issue #33's rules


def _raw(link: AgentSession, request: Request) -> Report:
    """``request`` as it is: no upload, no program named for it (an empty program stays)."""
    return link.send_raw(wire.encode_request(dataclasses.replace(request, seq=link.next_seq())))


def _upload(link: AgentSession, program: bytes) -> str:
    ok(link.send_raw(encode_program_data(link.next_seq(), 0, program)))
    ok(link.send_raw(encode_program_end(link.next_seq(), program)))
    return f"{zlib.crc32(program):08x}"


@pytest.mark.skipif(SOURCE is None, reason="KEEP and uploads need firmware built from source")
def test_keep_names_the_held_program_not_the_string(link: AgentSession) -> None:
    """KEEP on an upload device compares the held program `program` names: an empty one
    (the program held last) is the loaded program until another one is held."""
    register(link, ("A", "B"))
    name = _upload(link, probe_program(("A", "B")).read_bytes())
    ok(_raw(link, Request.load(name, ("A", "B"), OptionsMap())))
    kept = _raw(link, Request.load("", ("A", "B"), OptionsMap(), keep=True, method="second"))
    assert [(e.name, e.calls) for e in ok(kept).entries] == [("A", 1), ("B", 1)]
    _upload(link, probe_program(("B", "A")).read_bytes())  # now the program held last
    other = _raw(link, Request.load("", ("A", "B"), OptionsMap(), keep=True, method="second"))
    assert (other.outcome, other.detail, other.entries) == (
        Outcome.RUNTIME_ERROR,
        RuntimeErrorCode.InvalidArgument,
        (),
    )
    by_name = _raw(link, Request.load(name, ("A", "B"), OptionsMap(), keep=True, method="second"))
    assert ok(by_name).fact("models") is None  # a LOAD of one model: no models fact


@pytest.mark.skipif(SOURCE is None, reason="uploads are served by firmware built from source")
def test_program_end_without_an_upload_is_length_and_other_requests_keep_the_upload(
    link: AgentSession,
) -> None:
    """PROGRAM_END with nothing under way is LENGTH; requests the device serves between two
    chunks (HELLO, RESET, LOAD) leave the upload under way as it was."""
    program = probe_program(("A",)).read_bytes()
    alone = link.send_raw(encode_program_end(link.next_seq(), program))
    assert (alone.outcome, alone.detail) == (Outcome.REJECTED, wire.WireErrorCode.LENGTH)
    half = len(program) // 2
    ok(link.send_raw(encode_program_data(link.next_seq(), 0, program[:half])))
    register(link, ("A",))
    ok(link.request(Request(Action.HELLO)))
    ok(link.request(Request(Action.RESET)))
    failed = _raw(link, Request.load("00000000", ("A",), OptionsMap()))  # not held
    assert (failed.outcome, failed.detail) == (Outcome.RUNTIME_ERROR, RuntimeErrorCode.AccessFailed)
    ok(link.send_raw(encode_program_data(link.next_seq(), half, program[half:])))
    held = ok(link.send_raw(encode_program_end(link.next_seq(), program)))
    assert held.fact("programs_held") == f"{zlib.crc32(program):08x}"


def test_a_refused_request_fills_the_replay_cache(link: AgentSession) -> None:
    """serial-protocol.md, Recovery: a refused request's report is cached like any other, so
    the same bytes again are a retransmission answered from the cache."""
    damaged = bytearray(wire.encode_request(dataclasses.replace(Request(Action.HELLO), seq=77)))
    damaged[-1] ^= 0xFF
    first = link.send_raw(bytes(damaged))
    assert (first.outcome, first.detail) == (Outcome.REJECTED, wire.WireErrorCode.CRC)
    assert link.send_raw(bytes(damaged)) == first
    assert fact(ok(link.request(Request(Action.HELLO))), "link_replays") == 1


def test_the_option_pool_counts_every_list_and_a_count_over_64_is_too_many_options(
    link: AgentSession,
) -> None:
    """The CAPACITY pool (wire-format.md, Error codes): backends, method_backends and further
    models all count; an option_count over 64 is TOO_MANY_OPTIONS even when it would also
    overflow the pool."""
    per_backend, per_map, per_request = capacity(link)
    names = PROBES[:per_map]
    full = full_map(names, per_backend)  # exactly the pool
    assert sum(len(b.options) for b in full.backends) == per_request
    one = OptionsMap.from_dict({"P": {"k": 1}})
    via_method = Request.load("", names, full, path=LoadPath.MODULE_BOTH, method_options=one)
    via_model = Request.load("", names, full, models=(LoadSpec("", ("P",), one),))
    for request in (via_method, via_model):
        report = _raw(link, request)
        assert (report.outcome, report.detail) == (Outcome.REJECTED, wire.WireErrorCode.CAPACITY)
    # A SET of the full pool and one more backend: its count is read before its options.
    more = OptionsMap.unchecked((*full.backends, *OptionsMap.from_dict({"Z": {}}).backends))
    frame = bytearray(wire.encode_request(Request(Action.SET, more, seq=link.next_seq()))[:-4])
    for count, error in (
        (65, wire.WireErrorCode.TOO_MANY_OPTIONS),
        (1, wire.WireErrorCode.CAPACITY),
    ):
        frame[-1] = count  # Z's option_count, the last byte of the body
        report = link.send_raw(wire.seal(bytes(frame)))
        assert (report.outcome, report.detail) == (Outcome.REJECTED, error), count
