"""Writes the golden vectors of wire format v2 (docs/wire-format.md) into this directory.

    python tests/vectors/generate.py

deletes every ``*.bin`` / ``*.json`` here and writes them again, deterministically.
A valid vector's JSON is its readable form; an invalid vector's JSON is
``{"error": CODE, "expect": "request" | "report" | "upload", "about": ...}``: decoding
the bytes as ``expect`` must fail with exactly ``CODE`` ("upload": the decoder of actions
9 and 10, a device with program upload). Stream vectors (``stream/``) are a byte
stream and the reports a device owes it (docs/wire-format.md, "Stream reading"). Every
vector is checked against :mod:`harness.codec.wire` (and
:mod:`harness.codec.wire.stream_reader`) before it is written. ``tests/unit/test_vectors.py``
and ``tests/system/test_stream_vectors.py`` fail when the committed files differ from what this
script produces.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.codec.readable import to_readable
from harness.codec.wire import (
    HEADER_SIZE,
    MAX_MESSAGE,
    WIRE_VERSION,
    MessageType,
    WireError,
    WireErrorCode,
    decode_report,
    decode_request,
    encode_report,
    encode_request,
    seal,
)
from harness.codec.wire.program_messages import (
    ProgramData,
    ProgramEnd,
    ProgramUpload,
    decode_upload,
    encode_upload,
)
from harness.codec.wire.stream_reader import StreamMessage, StreamReader, StreamUnit
from harness.data.messages import Action, LoadPath, LoadSpec, Outcome, Report, ReportEntry, Request
from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    BackendOptions,
    Option,
    OptionsMap,
    OptionValue,
)
from harness.data.runtime_error import RuntimeErrorCode

HERE = Path(__file__).resolve().parent

TWO, THREE, FOUR = "é", "€", "😀"  # 2-, 3- and 4-byte UTF-8 sequences
MULTIBYTE = TWO + THREE + FOUR
PROBE_OPTIONS: dict[str, OptionValue] = {"threads": 4, "fast": True, "mode": "perf"}
XNNPACK_OPTIONS: dict[str, OptionValue] = {
    "workspace_sharing_mode": 1,
    "weight_cache_enabled": True,
    "packed_cache_path": "/data/local/tmp/cache",
}
HELLO_FACTS = (
    Option("agent_version", "0.1.0"),
    Option("wire_version", WIRE_VERSION),
    Option("runtime", "executorch 1.5.1"),
    Option("abi", "x86_64"),
    Option("max_message", MAX_MESSAGE),
    Option("registry_capacity", 16),
    Option("capabilities", "load,execute,set,get,reset,register,hello"),
)
NOT_FOUND = RuntimeErrorCode.NotFound
INVALID_ARGUMENT = RuntimeErrorCode.InvalidArgument


@dataclass(frozen=True)
class Vector:
    """One golden vector: ``name.bin`` holds ``data``, ``name.json`` holds ``expected``."""

    name: str
    data: bytes
    expected: dict[str, object]

    def files(self) -> dict[str, bytes]:
        text = json.dumps(self.expected, ensure_ascii=False, indent=2) + "\n"
        return {f"{self.name}.bin": self.data, f"{self.name}.json": text.encode("utf-8")}


def ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i:02d}" for i in range(count)]


def request(
    action: Action,
    backends: Mapping[str, Mapping[str, object] | Sequence[tuple[str, object]]] | None = None,
    *,
    program: str = "",
    delegates: Sequence[str] = (),
    seq: int = 1,
    checked: bool = True,
) -> Request:
    options = OptionsMap.from_dict(backends or {}, checked=checked)  # type: ignore[arg-type]
    return Request(action, options, program, tuple(delegates), seq)


def load_request(
    path: LoadPath,
    backends: Mapping[str, Mapping[str, object]] | None = None,
    method_backends: Mapping[str, Mapping[str, object]] | None = None,
    *,
    keep: bool = False,
    method: str = "",
    checked: bool = True,
) -> Request:
    """A LOAD of a two-probe program through ``path``."""
    return Request.load(
        "/tmp/et-harness/two_probes.pte",
        ("ProbeA", "ProbeB"),
        OptionsMap.from_dict(backends or {}, checked=checked),  # type: ignore[arg-type]
        path=path,
        method_options=OptionsMap.from_dict(method_backends or {}, checked=checked),  # type: ignore[arg-type]
        keep=keep,
        method=method,
    )


def raw_request(
    action: int,
    backends: Sequence[BackendOptions],
    *,
    program: str = "",
    delegates: Sequence[str] = (),
) -> Request:
    """A request encoded as given (duplicates, out-of-range values, unknown actions)."""
    return Request(action, OptionsMap.unchecked(backends), program, tuple(delegates), 1)  # type: ignore[arg-type]


def one_option(action: Action, key: str, value: object) -> Request:
    """A request whose backend ProbeA has the single option ``key``."""
    return raw_request(action, [BackendOptions("ProbeA", (Option(key, value),))])  # type: ignore[arg-type]


def report(action: Action = Action.LOAD, outcome: Outcome = Outcome.OK, **fields: object) -> Report:
    return Report(action, outcome, **fields)  # type: ignore[arg-type]


def probe_entry(
    name: str, options: Mapping[str, object] = PROBE_OPTIONS, **fields: object
) -> ReportEntry:
    values = {"status": 0, "calls": 1, "executes": 1, "flags": 1} | fields
    return ReportEntry(name, options=tuple(Option(k, v) for k, v in options.items()), **values)  # type: ignore[arg-type]


def patched(frame: bytes, old: bytes, new: bytes, *, reseal: bool = True) -> bytes:
    """``frame`` with the one occurrence of ``old`` replaced by ``new``, then resealed."""
    body = frame[:-4]
    assert body.count(old) == 1, f"{old!r} occurs {body.count(old)} times"
    tampered = body.replace(old, new)
    return seal(tampered) if reseal else tampered + frame[-4:]


def header(
    *,
    magic: bytes = b"ETBO",
    version: int = WIRE_VERSION,
    msg_type: int = 1,
    flags: int = 0,
    length: int = 21,
    seq: int = 1,
) -> bytes:
    return magic + struct.pack("<BBHII", version, msg_type, flags, length, seq)


# ------------------------------------------------------------------------ valid messages


def valid_requests() -> Iterator[tuple[str, Request]]:
    yield "req_load_empty_map", request(Action.LOAD, seq=0)
    yield (
        "req_load",
        request(
            Action.LOAD,
            {"ProbeA": PROBE_OPTIONS, "ProbeB": {}},
            program="/data/local/tmp/et-harness/two_probes.pte",
            delegates=("ProbeA", "ProbeB"),
            seq=7,
        ),
    )
    yield "req_load_module", load_request(LoadPath.MODULE, {"ProbeA": PROBE_OPTIONS})
    yield (
        "req_load_module_method",
        load_request(LoadPath.MODULE_METHOD, {"ProbeA": {"k": 1}, "ProbeB": {"k": 2}}),
    )
    yield (
        "req_load_module_both",
        load_request(
            LoadPath.MODULE_BOTH,
            {"ProbeA": {"stored": 1}, "ProbeB": {"stored": 2}},
            {"ProbeA": {"explicit": True}},
        ),
    )
    yield (
        "req_load_module_both_explicit_empty",
        load_request(LoadPath.MODULE_BOTH, {"ProbeA": {"stored": 1}}),
    )
    yield (
        "req_load_keep_second_method",
        load_request(LoadPath.MODULE, {"ProbeA": {"k": "B"}}, keep=True, method="second"),
    )
    yield "req_load_method_63", load_request(LoadPath.PROGRAM, method="m" * 63)
    yield (
        "req_load_two_models",
        dataclasses.replace(
            load_request(LoadPath.PROGRAM, {"ProbeA": {"model": "A"}, "ProbeB": {"n": 1}}),
            models=(
                LoadSpec(
                    "/tmp/et-harness/two_probes.pte",
                    ("ProbeA", "ProbeB"),
                    OptionsMap.from_dict({"ProbeA": {"model": "B"}}),
                    LoadPath.MODULE_METHOD,
                ),
            ),
        ),
    )
    yield (
        "req_load_concurrent_8_models",
        dataclasses.replace(
            load_request(LoadPath.MODULE, {"ProbeA": {"model": 0}}),
            concurrent=True,
            models=tuple(
                LoadSpec(
                    f"/tmp/et-harness/m{n}.pte",
                    ("ProbeA",),
                    OptionsMap.from_dict({"ProbeA": {"model": n}}),
                    LoadPath(n % 4),
                    "forward" if n % 2 else "",
                    OptionsMap.from_dict({"ProbeA": {"explicit": n}})
                    if n % 4 == LoadPath.MODULE_BOTH
                    else OptionsMap(),
                )
                for n in range(1, 8)
            ),
        ),
    )
    yield (
        "req_load_module_both_8_and_8",
        load_request(
            LoadPath.MODULE_BOTH,
            {i: {"stored": n} for n, i in enumerate(ids("Probe", 8))},
            {i: {"explicit": n} for n, i in enumerate(ids("Probe", 8))},
        ),
    )
    yield "req_execute", request(Action.EXECUTE, seq=8)
    yield (
        "req_set",
        request(Action.SET, {"XnnpackBackend": XNNPACK_OPTIONS, "ProbeA": PROBE_OPTIONS}, seq=9),
    )
    yield (
        "req_get",
        request(
            Action.GET,
            {
                "XnnpackBackend": {
                    "workspace_sharing_mode": 0,
                    "weight_cache_enabled": False,
                    "packed_cache_path": "",
                }
            },
            seq=10,
        ),
    )
    yield "req_reset", request(Action.RESET, seq=11)
    yield "req_register", request(Action.REGISTER, {n: {} for n in ("ProbeA", "ProbeB", "ProbeC")})
    yield "req_hello", request(Action.HELLO, seq=0xFFFFFFFF)
    yield "req_reboot", request(Action.REBOOT, seq=12)
    yield (
        "req_types",
        request(
            Action.SET,
            {
                "ProbeA": [
                    ("on", True),
                    ("off", False),
                    ("zero", 0),
                    ("minus_one", -1),
                    ("one", 1),
                    ("empty", ""),
                    ("text", "x"),
                ]
            },
        ),
    )
    yield "req_int32_min", request(Action.SET, {"ProbeA": {"n": INT32_MIN}})
    yield "req_int32_max", request(Action.SET, {"ProbeA": {"n": INT32_MAX}})
    yield "req_key_63", request(Action.SET, {"ProbeA": {"k" * 63: 1}})
    yield "req_key_63_multibyte", request(Action.SET, {"ProbeA": {THREE * 21: 1}})
    yield "req_key_1", request(Action.SET, {"ProbeA": {"k": 1}})
    yield "req_string_255", request(Action.SET, {"ProbeA": {"s": "v" * 255}})
    yield "req_string_255_multibyte", request(Action.SET, {"ProbeA": {"s": THREE * 85}})
    yield "req_id_63", request(Action.SET, {"P" * 63: {"k": 1}})
    yield "req_id_63_multibyte", request(Action.SET, {THREE * 21: {"k": 1}})
    yield "req_id_1", request(Action.SET, {"P": {"k": 1}})
    yield "req_delegate_id_63", request(Action.LOAD, delegates=("D" * 63, TWO * 31 + "D"))
    yield "req_program_1024", request(Action.LOAD, program="/" + "p" * 1023)
    yield "req_program_1024_multibyte", request(Action.LOAD, program=FOUR * 256)
    yield (
        "req_load_8_backends",
        request(Action.LOAD, {i: {"index": n} for n, i in enumerate(ids("Probe", 8))}),
    )
    for action in (Action.SET, Action.GET):
        yield (
            f"req_{action.name.lower()}_16_backends",
            request(
                action, {i: {"index": n} for n, i in enumerate(ids("Probe", 16))}, checked=False
            ),
        )
    yield (
        "req_register_16",
        request(Action.REGISTER, {i: {} for i in ids("Probe", 16)}, checked=False),
    )
    yield (
        "req_options_64",
        request(Action.LOAD, {"ProbeA": {k: n for n, k in enumerate(ids("key", 64))}}),
    )
    yield (
        "req_set_options_64",
        request(Action.SET, {"ProbeA": {k: n % 2 == 0 for n, k in enumerate(ids("flag", 64))}}),
    )
    yield "req_delegates_8", request(Action.LOAD, delegates=ids("Probe", 8))
    yield (
        "req_delegates_repeated",
        request(Action.LOAD, {"ProbeA": {"k": 1}}, delegates=("ProbeA", "ProbeA", "ProbeB")),
    )
    yield (
        "req_same_key_in_two_backends",
        request(Action.LOAD, {"ProbeA": {"threads": 1}, "ProbeB": {"threads": 2}}),
    )
    yield "req_backend_without_options", request(Action.SET, {"ProbeA": {}, "ProbeB": {"k": 1}})
    yield (
        "req_utf8",
        request(
            Action.LOAD,
            {
                f"Probe{MULTIBYTE}": {
                    f"clé_{THREE}_{FOUR}": f"värde {THREE}uro {FOUR}",
                    "tid": "時間",
                    "ok": True,
                },
                "ProbeB": {"emoji_🙂": "🙂🙃"},
            },
            program=f"/data/local/tmp/{MULTIBYTE}.pte",
            delegates=(f"Probe{MULTIBYTE}", "ProbeB"),
            seq=42,
        ),
    )
    yield (
        "req_utf8_edges",
        request(
            Action.SET,
            {
                "ProbeA": {
                    "u0080": "\u0080",
                    "u07ff": "\u07ff",
                    "u0800": "\u0800",
                    "uffff": "\uffff",
                    "u10000": "\U00010000",
                    "u10ffff": "\U0010ffff",
                    "ctrl": "\x01\t\n\x7f",
                }
            },
        ),
    )


def valid_reports() -> Iterator[tuple[str, Report]]:
    yield (
        "rep_hello",
        report(
            Action.HELLO,
            facts=HELLO_FACTS,
            entries=(
                ReportEntry("XnnpackBackend", 0),
                ReportEntry("ProbeA", 0, flags=1),
                ReportEntry("ProbeB", 0, flags=1),
            ),
            seq=1,
        ),
    )
    yield (
        "rep_load",
        report(
            Action.LOAD,
            facts=(Option("load_us", 120), Option("execute_us", 35)),
            entries=(probe_entry("ProbeA"), probe_entry("ProbeB", {})),
            seq=7,
        ),
    )
    yield (
        "rep_load_two_models",
        report(
            Action.LOAD,
            entries=(
                probe_entry("ProbeA", {"model": "A"}),
                probe_entry("ProbeB", {"n": 1}),
                probe_entry("ProbeA", {"model": "B"}, model=1),
                probe_entry("ProbeB", {}, model=1),
            ),
            seq=7,
        ),
    )
    yield (
        "rep_execute",
        report(
            Action.EXECUTE,
            entries=(probe_entry("ProbeA", {}, calls=0, executes=2),),
            facts=(Option("execute_us", 12),),
            seq=8,
        ),
    )
    yield (
        "rep_execute_two_models",
        report(
            Action.EXECUTE,
            entries=(
                probe_entry("ProbeA", {}, calls=0, executes=1),
                probe_entry("ProbeA", {}, calls=0, executes=1, model=1),
            ),
            facts=(Option("execute_us", 12),),
            seq=8,
        ),
    )
    yield (
        "rep_set_not_found",
        report(
            Action.SET,
            entries=(
                probe_entry("ProbeA", calls=1, executes=0),
                ReportEntry("NoSuchBackend", NOT_FOUND),
                ReportEntry("XnnpackBackend", INVALID_ARGUMENT, calls=1),
            ),
            seq=9,
        ),
    )
    yield (
        "rep_get",
        report(
            Action.GET,
            entries=(
                ReportEntry(
                    "XnnpackBackend",
                    0,
                    calls=1,
                    options=tuple(Option(k, v) for k, v in XNNPACK_OPTIONS.items()),
                ),
                ReportEntry("Missing", NOT_FOUND, options=(Option("k", 0),)),
            ),
            seq=10,
        ),
    )
    yield "rep_reset", report(Action.RESET, seq=11)
    yield "rep_reboot", report(Action.REBOOT, seq=12)
    held = (Option("program_received", 6), Option("program_bytes", 0), Option("programs_held", ""))
    yield (
        "rep_program_data",
        report(Action.PROGRAM_DATA, message="chunk stored", facts=held, seq=13),
    )
    yield (
        "rep_program_end",
        report(
            Action.PROGRAM_END,
            message="program held",
            facts=(
                Option("program_received", 0),
                Option("program_bytes", 6),
                Option("programs_held", "4c430b86,1a2b3c4d"),
            ),
            seq=14,
        ),
    )
    yield (
        "rep_register",
        report(
            Action.REGISTER,
            entries=(
                ReportEntry("ProbeA", 0),
                ReportEntry("ProbeA", INVALID_ARGUMENT),
                ReportEntry("ProbeC", RuntimeErrorCode.Internal),
            ),
            seq=12,
        ),
    )
    yield (
        "rep_rejected",
        report(
            Action.NONE,
            Outcome.REJECTED,
            detail=WireErrorCode.KEY_LENGTH,
            message="KEY_LENGTH at byte 40: key is 64 bytes, limit 1..63 bytes",
            seq=13,
        ),
    )
    yield (
        "rep_rejected_without_seq",
        report(Action.NONE, Outcome.REJECTED, detail=WireErrorCode.TRUNCATED, seq=0),
    )
    yield (
        "rep_runtime_error",
        report(
            Action.LOAD,
            Outcome.RUNTIME_ERROR,
            detail=RuntimeErrorCode.InvalidProgram,
            message="load_method(forward) failed: InvalidProgram (0x23)",
            facts=(Option("load_us", 5),),
            seq=14,
        ),
    )
    yield (
        "rep_unsupported",
        report(
            Action.LOAD, Outcome.UNSUPPORTED, message="this device has no program loader", seq=15
        ),
    )
    yield (
        "rep_duplicates",
        report(
            Action.LOAD,
            facts=(Option("load_us", 1), Option("load_us", 2)),
            entries=(
                probe_entry("ProbeA", {}, calls=1),
                ReportEntry(
                    "ProbeA",
                    0,
                    calls=1,
                    executes=1,
                    flags=1,
                    options=(Option("k", 1), Option("k", "again"), Option("k", False)),
                ),
            ),
            seq=16,
        ),
    )
    yield (
        "rep_field_maxima",
        report(
            Action.EXECUTE,
            detail=0xFFFFFFFF,
            entries=(ReportEntry("ProbeA", 0xFFFFFFFF, 0xFFFF, 0xFFFF, 1),),
            seq=0xFFFFFFFF,
        ),
    )
    yield (
        "rep_facts_32",
        report(Action.HELLO, facts=tuple(Option(k, n) for n, k in enumerate(ids("fact", 32)))),
    )
    yield (
        "rep_entries_16",
        report(Action.SET, entries=tuple(ReportEntry(n, NOT_FOUND) for n in ids("Backend", 16))),
    )
    yield (
        "rep_entry_options_64",
        report(
            Action.LOAD,
            entries=(probe_entry("ProbeA", {k: f"v{n}" for n, k in enumerate(ids("key", 64))}),),
        ),
    )
    yield (
        "rep_message_1024",
        report(Action.LOAD, Outcome.RUNTIME_ERROR, detail=1, message="m" * 1024),
    )
    yield (
        "rep_message_1024_multibyte",
        report(Action.LOAD, Outcome.RUNTIME_ERROR, detail=1, message=FOUR * 256),
    )
    yield (
        "rep_entry_name_63",
        report(Action.LOAD, entries=(probe_entry("N" * 63, {}), probe_entry(THREE * 21, {}))),
    )
    yield (
        "rep_utf8",
        report(
            Action.LOAD,
            message=f"ok {MULTIBYTE}",
            facts=(Option(f"fact_{MULTIBYTE}", f"värde {FOUR}"),),
            entries=(probe_entry(f"Probe{MULTIBYTE}", {f"clé{THREE}": f"{FOUR}"}),),
        ),
    )


# ------------------------------------------------------------------------ invalid bytes


def in_version(frame: bytes, version: int) -> bytes:
    """``frame`` with version byte ``version``, resealed."""
    return seal(frame[:4] + bytes([version]) + frame[5:-4])


def old_version_messages() -> Iterator[tuple[str, bytes, WireErrorCode, str, str]]:
    """Version-1 messages, as agents and firmware built before version 2 sent them, in each
    layout version 1 had: refused with VERSION, never read by today's rules."""
    yield (
        "bad_version_1_hello",
        in_version(encode_request(request(Action.HELLO)), 1),
        WireErrorCode.VERSION,
        "request",
        "a version-1 HELLO request: its body is today's too, and it is still refused",
    )
    load = encode_request(
        Request.load("/tmp/p.pte", ("ProbeA",), OptionsMap.from_dict({"ProbeA": {"k": 1}}))
    )
    load_fields = b"\0\0\0\0\0"  # path program, flags 0, method "", no method backends
    assert load[-4 - 6 : -4] == load_fields + b"\0", "LOAD ends with its load fields, 0 models"
    yield (
        "bad_version_1_load_without_load_fields",
        in_version(load[: -4 - 6] + load[-4:], 1),
        WireErrorCode.VERSION,
        "request",
        "a LOAD of the first version-1 layout, ending after its backends",
    )
    yield (
        "bad_version_1_load_without_models",
        in_version(load[: -4 - 1] + load[-4:], 1),
        WireErrorCode.VERSION,
        "request",
        "a LOAD of the second version-1 layout: load fields, no model_count",
    )
    entry = probe_entry("ProbeA", {"k": 1})
    frame = encode_report(report(Action.LOAD, entries=(entry,)))
    yield (
        "bad_version_1_report_entry_without_model",
        in_version(patched(frame, b"\x01\x00\x01\x00\x01\x00\x01", b"\x01\x00\x01\x00\x01\x01"), 1),
        WireErrorCode.VERSION,
        "report",
        "a version-1 LOAD report whose entry has no model byte (the layouts before version 2)",
    )


def header_errors() -> Iterator[tuple[str, bytes, WireErrorCode, str, str]]:
    """(name, bytes, error, expect, about) for decoding steps 1-5."""
    hello = encode_request(request(Action.HELLO))
    report_bytes = encode_report(report(Action.RESET))
    yield "bad_empty", b"", WireErrorCode.TRUNCATED, "request", "no bytes at all"
    yield (
        "bad_header_15_bytes",
        hello[:15],
        WireErrorCode.TRUNCATED,
        "request",
        ("15 bytes: shorter than the 16-byte header"),
    )
    yield "bad_magic", b"ETBX" + hello[4:], WireErrorCode.BAD_MAGIC, "request", "magic ETBX"
    yield (
        "bad_magic_lowercase",
        b"etbo" + hello[4:],
        WireErrorCode.BAD_MAGIC,
        "request",
        ("magic etbo: the magic is case-sensitive"),
    )
    for version in (0, WIRE_VERSION + 1, 255):
        yield (
            f"bad_version_{version}",
            in_version(hello, version),
            WireErrorCode.VERSION,
            "request",
            f"version {version}, valid CRC",
        )
    yield from old_version_messages()
    for msg_type in (0, 3):
        yield (
            f"bad_type_{msg_type}",
            seal(hello[:5] + bytes([msg_type]) + hello[6:-4]),
            WireErrorCode.MSG_TYPE,
            "request",
            f"type {msg_type}, valid CRC",
        )
    yield (
        "bad_report_as_request",
        report_bytes,
        WireErrorCode.MSG_TYPE,
        "request",
        ("a valid report given to the request decoder"),
    )
    yield (
        "bad_request_as_report",
        hello,
        WireErrorCode.MSG_TYPE,
        "report",
        ("a valid request given to the report decoder"),
    )
    for flags in (1, 0x8000):
        yield (
            f"bad_header_flags_{flags:04x}",
            seal(hello[:6] + struct.pack("<H", flags) + hello[8:-4]),
            WireErrorCode.FLAGS,
            "request",
            f"reserved header flags 0x{flags:04x}",
        )
    yield (
        "bad_length_20",
        header(length=20) + b"\0\0\0\0",
        WireErrorCode.LENGTH,
        "request",
        ("length field 20, below the minimum 21 (buffer of 20 bytes)"),
    )
    yield (
        "bad_length_0",
        header(length=0) + b"\0" * 5,
        WireErrorCode.LENGTH,
        "request",
        ("length field 0"),
    )
    yield (
        "bad_length_above_max",
        header(length=MAX_MESSAGE + 1) + b"\x05\0\0\0\0\0\0",
        WireErrorCode.LENGTH,
        "request",
        "length field 1048577, above MAX_MESSAGE; the buffer is short, but LENGTH comes first",
    )
    yield (
        "bad_truncated_message",
        hello[:-1],
        WireErrorCode.TRUNCATED,
        "request",
        ("the buffer is one byte shorter than the length field"),
    )
    yield (
        "bad_buffer_longer_than_length",
        hello + b"\0",
        WireErrorCode.TRAILING,
        "request",
        ("one byte after the message's length"),
    )
    yield (
        "bad_crc",
        hello[:-1] + bytes([hello[-1] ^ 0x01]),
        WireErrorCode.CRC,
        "request",
        "last CRC bit flipped",
    )
    yield (
        "bad_crc_body_changed",
        patched(hello, b"\x07\x00\x00", b"\x05\x00\x00", reseal=False),
        WireErrorCode.CRC,
        "request",
        "action byte changed from HELLO to RESET, CRC kept",
    )
    yield (
        "bad_report_crc",
        report_bytes[:-4] + b"\0\0\0\0",
        WireErrorCode.CRC,
        "report",
        "report with a zero CRC",
    )
    yield (
        "bad_order_magic_before_version",
        b"ETBX" + bytes([9]) + hello[5:],
        WireErrorCode.BAD_MAGIC,
        "request",
        "bad magic and version 9: magic is checked first",
    )
    yield (
        "bad_order_version_before_type",
        header(version=1, msg_type=9, length=21) + b"\0" * 5,
        WireErrorCode.VERSION,
        "request",
        "version 1 and type 9: version is checked first",
    )
    yield (
        "bad_order_type_before_flags",
        header(msg_type=2, flags=1) + b"\0" * 5,
        WireErrorCode.MSG_TYPE,
        "request",
        "a report with header flags, given to the request decoder: type comes before flags",
    )
    yield (
        "bad_order_flags_before_length",
        header(flags=4, length=5) + b"\0" * 5,
        WireErrorCode.FLAGS,
        "request",
        "flags 4 and length 5: flags come before length",
    )
    yield (
        "bad_order_length_before_truncated",
        header(length=20)[:16],
        WireErrorCode.LENGTH,
        "request",
        "16 bytes with length 20: length before buffer size",
    )
    yield (
        "bad_order_truncated_before_crc",
        hello[:20],
        WireErrorCode.TRUNCATED,
        "request",
        "buffer ends inside the CRC: buffer size is checked before the CRC",
    )
    yield (
        "bad_order_crc_before_body",
        patched(hello, b"\x07\x00\x00", b"\x09\x00\x00", reseal=False),
        WireErrorCode.CRC,
        "request",
        "unknown action 9 under a wrong CRC: CRC comes first",
    )


def request_body_errors() -> Iterator[tuple[str, bytes, WireErrorCode, str]]:
    """(name, bytes, error, about) for request bodies."""
    key64 = "k" * 64
    yield (
        "bad_request_action_0",
        encode_request(raw_request(0, [])),
        WireErrorCode.ACTION,
        ("request action 0 (none exists only in reports)"),
    )
    yield (
        "bad_request_action_11",
        encode_request(raw_request(11, [])),
        WireErrorCode.ACTION,
        ("request action 11 (8 is REBOOT; 9, 10 are the program upload actions)"),
    )
    yield (
        "bad_request_action_255",
        encode_request(raw_request(255, [])),
        WireErrorCode.ACTION,
        ("request action 255"),
    )
    # Lengths one past each limit, and empty where the minimum is 1.
    yield (
        "bad_key_64",
        encode_request(one_option(Action.SET, key64, 1)),
        WireErrorCode.KEY_LENGTH,
        ("key of 64 bytes"),
    )
    yield (
        "bad_key_64_multibyte",
        encode_request(one_option(Action.SET, FOUR * 16, 1)),
        WireErrorCode.KEY_LENGTH,
        "key of 16 four-byte characters: 64 bytes, 16 characters",
    )
    yield (
        "bad_key_empty",
        encode_request(one_option(Action.LOAD, "", 1)),
        WireErrorCode.KEY_LENGTH,
        ("empty key"),
    )
    yield (
        "bad_string_256",
        encode_request(one_option(Action.SET, "s", "v" * 256)),
        WireErrorCode.STRING_LENGTH,
        "string value of 256 bytes",
    )
    yield (
        "bad_string_256_multibyte",
        encode_request(one_option(Action.SET, "s", FOUR * 64)),
        WireErrorCode.STRING_LENGTH,
        "string value of 64 four-byte characters: 256 bytes",
    )
    for name, backend_id, about in (
        ("bad_id_64", "P" * 64, "backend id of 64 bytes"),
        ("bad_id_64_multibyte", FOUR * 16, "backend id of 16 four-byte characters: 64 bytes"),
        ("bad_id_empty", "", "empty backend id"),
    ):
        yield (
            name,
            encode_request(raw_request(Action.SET, [BackendOptions(backend_id)])),
            WireErrorCode.ID_LENGTH,
            about,
        )
    yield (
        "bad_register_id_64",
        encode_request(raw_request(Action.REGISTER, [BackendOptions("R" * 64)])),
        WireErrorCode.ID_LENGTH,
        "REGISTER id of 64 bytes",
    )
    yield (
        "bad_delegate_id_64",
        encode_request(raw_request(Action.LOAD, [], delegates=("D" * 64,))),
        WireErrorCode.ID_LENGTH,
        "delegate id of 64 bytes",
    )
    yield (
        "bad_delegate_id_empty",
        encode_request(raw_request(Action.LOAD, [], delegates=("A", ""))),
        WireErrorCode.ID_LENGTH,
        "second delegate id empty",
    )
    yield (
        "bad_program_1025",
        encode_request(raw_request(Action.LOAD, [], program="/" + "p" * 1024)),
        WireErrorCode.TEXT_LENGTH,
        "LOAD program path of 1025 bytes",
    )
    for name, value in (
        ("bad_int_above_int32", INT32_MAX + 1),
        ("bad_int_below_int32", INT32_MIN - 1),
        ("bad_int_i64_max", 2**63 - 1),
        ("bad_int_i64_min", -(2**63)),
    ):
        yield (
            name,
            encode_request(one_option(Action.SET, "n", value)),
            WireErrorCode.INT_RANGE,
            f"int value {value}, outside int32",
        )
    # Counts one past each limit.
    yield (
        "bad_load_9_backends",
        encode_request(request(Action.LOAD, {i: {} for i in ids("Probe", 9)}, checked=False)),
        WireErrorCode.TOO_MANY_BACKENDS,
        "LOAD with 9 backends (LoadBackendOptionsMap holds 8)",
    )
    for action in (Action.SET, Action.GET, Action.REGISTER):
        yield (
            f"bad_{action.name.lower()}_17_backends",
            encode_request(request(action, {i: {} for i in ids("Probe", 17)}, checked=False)),
            WireErrorCode.TOO_MANY_BACKENDS,
            f"{action.name} with 17 backends",
        )
    for action in (Action.LOAD, Action.SET):
        yield (
            f"bad_{action.name.lower()}_options_65",
            encode_request(
                request(action, {"ProbeA": {k: 1 for k in ids("key", 65)}}, checked=False)
            ),
            WireErrorCode.TOO_MANY_OPTIONS,
            f"{action.name} backend with 65 options",
        )
    yield (
        "bad_delegates_9",
        encode_request(raw_request(Action.LOAD, [], delegates=ids("Probe", 9))),
        WireErrorCode.TOO_MANY_DELEGATES,
        "LOAD with 9 delegates",
    )
    # Uniqueness.
    for action in (Action.LOAD, Action.SET, Action.GET):
        yield (
            f"bad_{action.name.lower()}_duplicate_key",
            encode_request(
                request(action, {"ProbeA": [("k", 1), ("other", 2), ("k", 1)]}, checked=False)
            ),
            WireErrorCode.DUPLICATE_KEY,
            f"{action.name}: key k twice in one backend",
        )
    yield (
        "bad_duplicate_key_different_types",
        encode_request(request(Action.SET, {"ProbeA": [("k", True), ("k", "x")]}, checked=False)),
        WireErrorCode.DUPLICATE_KEY,
        "key k twice, as bool and as string",
    )
    for action in (Action.LOAD, Action.SET, Action.REGISTER):
        yield (
            f"bad_{action.name.lower()}_duplicate_backend",
            encode_request(
                raw_request(
                    action,
                    [BackendOptions("ProbeA"), BackendOptions("ProbeB"), BackendOptions("ProbeA")],
                )
            ),
            WireErrorCode.DUPLICATE_BACKEND,
            f"{action.name}: backend ProbeA twice",
        )
    # Fields an action does not have.
    for action in (
        Action.EXECUTE,
        Action.SET,
        Action.GET,
        Action.RESET,
        Action.REGISTER,
        Action.HELLO,
        Action.REBOOT,
    ):
        lower = action.name.lower()
        yield (
            f"bad_{lower}_program",
            encode_request(raw_request(action, [], program="/p.pte")),
            WireErrorCode.UNEXPECTED_FIELD,
            f"{action.name} with a program",
        )
        yield (
            f"bad_{lower}_delegates",
            encode_request(raw_request(action, [], delegates=("ProbeA",))),
            WireErrorCode.UNEXPECTED_FIELD,
            f"{action.name} with a delegate",
        )
    for action in (Action.EXECUTE, Action.RESET, Action.HELLO, Action.REBOOT):
        yield (
            f"bad_{action.name.lower()}_backends",
            encode_request(raw_request(action, [BackendOptions("ProbeA")])),
            WireErrorCode.UNEXPECTED_FIELD,
            f"{action.name} with a backend",
        )
    yield (
        "bad_register_options",
        encode_request(one_option(Action.REGISTER, "k", 1)),
        WireErrorCode.UNEXPECTED_FIELD,
        "REGISTER with an option",
    )
    # Values.
    tagged = encode_request(one_option(Action.SET, "tagged", True))
    for tag in (0, 4, 255):
        yield (
            f"bad_tag_{tag}",
            patched(tagged, b"tagged\x01", b"tagged" + bytes([tag])),
            WireErrorCode.TAG,
            f"option type tag {tag}",
        )
    for byte in (2, 255):
        yield (
            f"bad_bool_{byte}",
            patched(tagged, b"tagged\x01\x01", b"tagged\x01" + bytes([byte])),
            WireErrorCode.BOOL,
            f"bool byte {byte}",
        )
    # NUL and UTF-8.
    yield (
        "bad_nul_in_key",
        encode_request(one_option(Action.SET, "a\0b", 1)),
        WireErrorCode.NUL,
        "NUL inside a key",
    )
    yield (
        "bad_nul_in_value",
        encode_request(one_option(Action.SET, "k", "value\0")),
        WireErrorCode.NUL,
        "NUL at the end of a string value",
    )
    yield (
        "bad_nul_in_id",
        encode_request(raw_request(Action.SET, [BackendOptions("\0Probe")])),
        WireErrorCode.NUL,
        "NUL at the start of a backend id",
    )
    yield (
        "bad_nul_in_program",
        encode_request(raw_request(Action.LOAD, [], program="/p\0.pte")),
        WireErrorCode.NUL,
        "NUL inside the LOAD program path",
    )
    yield (
        "bad_nul_in_delegate",
        encode_request(raw_request(Action.LOAD, [], delegates=("Pro\0be",))),
        WireErrorCode.NUL,
        "NUL inside a delegate id",
    )
    utf8 = encode_request(
        raw_request(
            Action.LOAD,
            [BackendOptions("ProbeI", (Option("keyK", "valueV"),))],
            program="/progP",
            delegates=("delegD",),
        )
    )
    for name, old, new, about in (
        ("bad_utf8_overlong_key", b"keyK", b"ke\xc1\xbf", "overlong 2-byte form C1 BF in a key"),
        (
            "bad_utf8_overlong_3_byte",
            b"valueV",
            b"val\xe0\x80\xaf",
            "overlong 3-byte form E0 80 AF in a value",
        ),
        (
            "bad_utf8_overlong_nul",
            b"keyK",
            b"ke\xc0\x80",
            "overlong NUL C0 80 in a key: UTF8, not NUL",
        ),
        (
            "bad_utf8_surrogate",
            b"valueV",
            b"val\xed\xa0\x80",
            "surrogate U+D800 (ED A0 80) in a value",
        ),
        (
            "bad_utf8_low_surrogate",
            b"ProbeI",
            b"Pro\xed\xbf\xbf",
            "surrogate U+DFFF (ED BF BF) in a backend id",
        ),
        (
            "bad_utf8_above_max",
            b"ProbeI",
            b"Pr\xf4\x90\x80\x80",
            "U+110000 (F4 90 80 80) in a backend id",
        ),
        ("bad_utf8_f5", b"keyK", b"key\xf5", "byte F5, never valid in UTF-8, in a key"),
        (
            "bad_utf8_truncated_sequence",
            b"valueV",
            b"valu\xe2\x82",
            "value ends inside a 3-byte sequence E2 82",
        ),
        (
            "bad_utf8_truncated_4_byte",
            b"keyK",
            b"k\xf0\x9f\x98",
            "key ends inside a 4-byte sequence F0 9F 98",
        ),
        (
            "bad_utf8_lone_continuation",
            b"/progP",
            b"/prog\x80",
            "lone continuation byte 80 in the program path",
        ),
        ("bad_utf8_in_delegate", b"delegD", b"deleg\xff", "byte FF in a delegate id"),
    ):
        yield name, patched(utf8, old, new), WireErrorCode.UTF8, about
    # Truncation and trailing bytes inside the length.
    hello = encode_request(request(Action.HELLO))
    yield (
        "bad_body_only_action",
        seal(hello[:17]),
        WireErrorCode.TRUNCATED,
        "21-byte request: the program's length prefix is missing",
    )
    yield (
        "bad_body_half_length_prefix",
        seal(hello[:18]),
        WireErrorCode.TRUNCATED,
        "the program's length prefix has one of its two bytes",
    )
    key_bytes = encode_request(one_option(Action.SET, "keyK", 1))
    cut_key = key_bytes[: key_bytes.index(b"keyK") + 2]
    yield (
        "bad_truncated_key_bytes",
        seal(cut_key),
        WireErrorCode.TRUNCATED,
        "body ends after 2 of the key's 4 bytes",
    )
    yield (
        "bad_truncated_before_tag",
        seal(key_bytes[: key_bytes.index(b"keyK") + 4]),
        WireErrorCode.TRUNCATED,
        "body ends after the key, before its type tag",
    )
    yield (
        "bad_truncated_int_value",
        seal(key_bytes[: key_bytes.index(b"keyK") + 5 + 4]),
        WireErrorCode.TRUNCATED,
        "body ends after 4 of an int's 8 bytes",
    )
    string_bytes = encode_request(one_option(Action.SET, "keyK", "valueV"))
    yield (
        "bad_truncated_string_value",
        seal(string_bytes[: string_bytes.index(b"valueV") + 3]),
        WireErrorCode.TRUNCATED,
        "body ends inside a string value",
    )
    yield (
        "bad_truncated_before_backends",
        seal(hello[:20]),
        WireErrorCode.TRUNCATED,
        "body ends before the backend count",
    )
    yield (
        "bad_missing_options",
        seal(key_bytes[: key_bytes.index(b"keyK") - 2]),
        WireErrorCode.TRUNCATED,
        "a backend with option count 1 and no option",
    )
    yield (
        "bad_trailing_in_body",
        seal(hello[:-4] + b"\0"),
        WireErrorCode.TRAILING,
        "one zero byte between the last field and the CRC, length and CRC valid",
    )
    yield (
        "bad_trailing_after_options",
        seal(key_bytes[:-4] + b"\x01\x00k"),
        WireErrorCode.TRAILING,
        "three bytes after the last option",
    )
    # Order within the body.
    load_head = encode_request(request(Action.LOAD))[:16]
    yield (
        "bad_order_count_before_elements",
        seal(load_head + b"\x01\x00\x00\x00\x09"),
        WireErrorCode.TOO_MANY_BACKENDS,
        "LOAD backend count 9 and no backends: the count is checked before its elements",
    )
    yield (
        "bad_order_delegate_count_before_elements",
        seal(load_head + b"\x01\x00\x00\x09"),
        WireErrorCode.TOO_MANY_DELEGATES,
        "LOAD delegate count 9, body ends there: the count is checked before its elements",
    )
    yield from load_field_errors(load_head)
    yield (
        "bad_order_truncated_before_key_length",
        seal(key_bytes[: key_bytes.index(b"keyK") - 2] + b"\x40\x00kkkk"),
        WireErrorCode.TRUNCATED,
        "key length 64 with 4 bytes left: TRUNCATED, not KEY_LENGTH",
    )
    yield (
        "bad_order_key_length_before_nul",
        encode_request(one_option(Action.SET, "k\0" * 32, 1)),
        WireErrorCode.KEY_LENGTH,
        "64-byte key with NUL bytes: the length is checked first",
    )
    yield (
        "bad_order_key_length_before_utf8",
        patched(encode_request(one_option(Action.SET, "k" * 64, 1)), b"k" * 64, b"\xff" * 64),
        WireErrorCode.KEY_LENGTH,
        "64-byte key of FF bytes: the length is checked first",
    )
    yield (
        "bad_order_nul_before_utf8",
        patched(encode_request(one_option(Action.SET, "k", "ab\x01")), b"ab\x01", b"\xff\xfe\x00"),
        WireErrorCode.NUL,
        "value FF FE 00: NUL is checked before UTF-8, wherever it is",
    )
    yield (
        "bad_order_duplicate_key_before_tag",
        patched(
            encode_request(
                request(Action.SET, {"ProbeA": [("k", True), ("k", True)]}, checked=False)
            ),
            b"\x01\x00k\x01\x01\x01\x00k\x01\x01",
            b"\x01\x00k\x01\x01\x01\x00k\x09\x01",
        ),
        WireErrorCode.DUPLICATE_KEY,
        "second k has tag 9: the duplicate is found before the tag",
    )
    yield (
        "bad_order_duplicate_backend_before_count",
        patched(
            encode_request(
                raw_request(Action.SET, [BackendOptions("ProbeA"), BackendOptions("ProbeA")])
            ),
            b"ProbeA\x00\x06\x00ProbeA\x00",
            b"ProbeA\x00\x06\x00ProbeA\x41",
        ),
        WireErrorCode.DUPLICATE_BACKEND,
        "second ProbeA has option count 65 and no options: the duplicate is found first",
    )
    yield (
        "bad_order_unexpected_before_text_length",
        encode_request(raw_request(Action.EXECUTE, [], program="p" * 1025)),
        WireErrorCode.UNEXPECTED_FIELD,
        "EXECUTE with a 1025-byte program: a non-empty field is UNEXPECTED_FIELD, any size",
    )
    yield (
        "bad_order_unexpected_before_nul",
        encode_request(raw_request(Action.SET, [], program="\0")),
        WireErrorCode.UNEXPECTED_FIELD,
        "SET with program \\0: UNEXPECTED_FIELD before NUL",
    )
    yield (
        "bad_order_unexpected_before_delegate_count",
        encode_request(raw_request(Action.GET, [], delegates=ids("D", 9))),
        WireErrorCode.UNEXPECTED_FIELD,
        "GET with 9 delegates: UNEXPECTED_FIELD, not TOO_MANY_DELEGATES",
    )
    yield (
        "bad_order_unexpected_before_option_count",
        encode_request(
            raw_request(
                Action.REGISTER,
                [BackendOptions("ProbeA", tuple(Option(k, 1) for k in ids("key", 65)))],
            )
        ),
        WireErrorCode.UNEXPECTED_FIELD,
        "REGISTER id with 65 options: UNEXPECTED_FIELD, not TOO_MANY_OPTIONS",
    )
    yield (
        "bad_order_unexpected_before_backend_count",
        encode_request(raw_request(Action.HELLO, [BackendOptions(i) for i in ids("P", 17)])),
        WireErrorCode.UNEXPECTED_FIELD,
        "HELLO with 17 backends: UNEXPECTED_FIELD, not TOO_MANY_BACKENDS",
    )
    yield (
        "bad_order_int_range_before_trailing",
        seal(encode_request(one_option(Action.SET, "n", 2**31))[:-4] + b"\0"),
        WireErrorCode.INT_RANGE,
        "int 2^31 followed by a trailing byte",
    )
    yield (
        "bad_order_first_field_wins",
        encode_request(
            raw_request(Action.LOAD, [BackendOptions("P" * 64, (Option("", 1),))], delegates=("",))
        ),
        WireErrorCode.ID_LENGTH,
        "empty delegate id, 64-byte backend id, empty key: the first field's error wins",
    )


def load_field_errors(load_head: bytes) -> Iterator[tuple[str, bytes, WireErrorCode, str]]:
    """(name, bytes, error, about) for the fields only LOAD carries."""
    # action LOAD, empty program, no delegates, no backends: the LOAD fields follow.
    common = b"\x01\x00\x00\x00\x00"
    yield (
        "bad_load_without_path",
        seal(load_head + common),
        WireErrorCode.TRUNCATED,
        "LOAD body ends after its backends: path, flags, method and method map are required",
    )
    for path in (4, 255):
        yield (
            f"bad_load_path_{path}",
            seal(load_head + common + bytes((path,)) + b"\x00\x00\x00\x00"),
            WireErrorCode.LOAD_PATH,
            f"LOAD path {path}: 0 program, 1 module, 2 module_method, 3 module_both",
        )
    for flags in (4, 0x80):
        yield (
            f"bad_load_flags_{flags:02x}",
            seal(load_head + common + b"\x01" + bytes((flags,)) + b"\x00\x00\x00"),
            WireErrorCode.FLAGS,
            f"LOAD flags 0x{flags:02x}: only bits 0 (KEEP) and 1 (CONCURRENT) are defined",
        )
    # path program, no flags, method "", no method map: the further-model count follows.
    own = common + b"\x00\x00\x00\x00\x00"
    yield (
        "bad_load_without_model_count",
        seal(load_head + own),
        WireErrorCode.TRUNCATED,
        "LOAD body ends after its method map: the further-model count is required",
    )
    yield (
        "bad_load_8_further_models",
        seal(load_head + own + b"\x08"),
        WireErrorCode.TOO_MANY_MODELS,
        "8 further models: a LOAD carries at most 8 models, its own and 7 more",
    )
    for flags in (1, 2):
        yield (
            f"bad_load_model_flags_{flags:02x}",
            seal(
                load_head
                + own
                + b"\x01"
                + b"\x00\x00\x00\x00"
                + bytes((0, flags))
                + b"\x00\x00\x00"
            ),
            WireErrorCode.FLAGS,
            f"a further model with flags 0x{flags:02x}: KEEP and CONCURRENT are the LOAD's own",
        )
    yield (
        "bad_load_model_path_4",
        seal(load_head + own + b"\x01" + b"\x00\x00\x00\x00" + b"\x04\x00\x00\x00\x00"),
        WireErrorCode.LOAD_PATH,
        "a further model with load path 4",
    )
    yield (
        "bad_load_model_method_64",
        seal(
            load_head
            + own
            + b"\x01"
            + b"\x00\x00\x00\x00"
            + b"\x00\x00\x40\x00"
            + b"m" * 64
            + b"\x00"
        ),
        WireErrorCode.ID_LENGTH,
        "a further model's method of 64 bytes: methods are ids, 0..63 bytes",
    )
    yield (
        "bad_load_model_program_method_map",
        seal(load_head + own + b"\x01" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00\x01"),
        WireErrorCode.UNEXPECTED_FIELD,
        "a further model on path program with a method map: only module_both has one, per model",
    )
    yield (
        "bad_load_model_duplicate_backend",
        encode_request(
            dataclasses.replace(
                load_request(LoadPath.PROGRAM),
                models=(
                    LoadSpec(
                        "",
                        (),
                        OptionsMap.unchecked(
                            [BackendOptions("ProbeA", ()), BackendOptions("ProbeA", ())]
                        ),
                    ),
                ),
            )
        ),
        WireErrorCode.DUPLICATE_BACKEND,
        "a further model naming ProbeA twice in its map: ids are unique within each list",
    )
    yield (
        "bad_load_model_9_backends",
        encode_request(
            dataclasses.replace(
                load_request(LoadPath.PROGRAM),
                models=(
                    LoadSpec(
                        "",
                        (),
                        OptionsMap.from_dict({i: {} for i in ids("Probe", 9)}, checked=False),
                    ),
                ),
            )
        ),
        WireErrorCode.TOO_MANY_BACKENDS,
        "a further model's map with 9 backends (LoadBackendOptionsMap holds 8)",
    )
    yield (
        "bad_order_load_path_before_flags",
        seal(load_head + common + b"\x09\xff\x00\x00\x00"),
        WireErrorCode.LOAD_PATH,
        "LOAD path 9 and flags 0xff: the path comes first",
    )
    yield (
        "bad_load_method_64",
        encode_request(load_request(LoadPath.PROGRAM, method="m" * 64, checked=False)),
        WireErrorCode.ID_LENGTH,
        "LOAD method name of 64 bytes",
    )
    yield (
        "bad_load_method_nul",
        encode_request(load_request(LoadPath.PROGRAM, method="for\0ward", checked=False)),
        WireErrorCode.NUL,
        "NUL inside the LOAD method name",
    )
    for path in (LoadPath.PROGRAM, LoadPath.MODULE, LoadPath.MODULE_METHOD):
        yield (
            f"bad_load_{path.label}_method_map",
            seal(load_head + common + bytes((path,)) + b"\x00\x00\x00\x01\x01\x00A\x00"),
            WireErrorCode.UNEXPECTED_FIELD,
            f"LOAD {path.label} with a method map: only module_both carries one",
        )
    yield (
        "bad_load_module_both_9_method_backends",
        encode_request(
            load_request(LoadPath.MODULE_BOTH, {}, {i: {} for i in ids("Probe", 9)}, checked=False)
        ),
        WireErrorCode.TOO_MANY_BACKENDS,
        "module_both method map with 9 backends (LoadBackendOptionsMap holds 8)",
    )
    yield (
        "bad_load_module_both_duplicate_method_backend",
        encode_request(
            Request.load(
                "",
                (),
                OptionsMap(),
                path=LoadPath.MODULE_BOTH,
                method_options=OptionsMap.unchecked(
                    [BackendOptions("ProbeA"), BackendOptions("ProbeA")]
                ),
            )
        ),
        WireErrorCode.DUPLICATE_BACKEND,
        "module_both method map names ProbeA twice",
    )
    yield (
        "bad_load_module_both_duplicate_method_key",
        encode_request(
            Request.load(
                "",
                (),
                OptionsMap(),
                path=LoadPath.MODULE_BOTH,
                method_options=OptionsMap.unchecked(
                    [BackendOptions("ProbeA", (Option("k", 1), Option("k", 2)))]
                ),
            )
        ),
        WireErrorCode.DUPLICATE_KEY,
        "module_both method map: key k twice in one backend",
    )
    yield (
        "bad_load_trailing_after_models",
        seal(encode_request(load_request(LoadPath.MODULE_BOTH))[:-4] + b"\x00"),
        WireErrorCode.TRAILING,
        "one byte after the LOAD's (empty) list of further models",
    )


def report_body_errors() -> Iterator[tuple[str, bytes, WireErrorCode, str]]:
    """(name, bytes, error, about) for report bodies."""

    def raw(**fields: object) -> bytes:
        return encode_report(report(**fields), checked=False)  # type: ignore[arg-type]

    entry = probe_entry("ProbeA", {"k": 1})
    yield "bad_report_action_11", raw(action=11), WireErrorCode.ACTION, "report action 11"
    yield "bad_report_outcome_4", raw(outcome=4), WireErrorCode.OUTCOME, "outcome 4"
    yield "bad_report_outcome_255", raw(outcome=255), WireErrorCode.OUTCOME, "outcome 255"
    yield (
        "bad_order_action_before_outcome",
        raw(action=11, outcome=9),
        WireErrorCode.ACTION,
        "action 11 and outcome 9: action comes first",
    )
    for flags in (2, 3, 0x80):
        yield (
            f"bad_entry_flags_{flags:02x}",
            raw(entries=(probe_entry("ProbeA", {}, flags=flags),)),
            WireErrorCode.FLAGS,
            f"entry flags 0x{flags:02x}: only bit 0 is defined",
        )
    yield (
        "bad_entry_model_8",
        raw(entries=(probe_entry("ProbeA", {}, model=8),)),
        WireErrorCode.TOO_MANY_MODELS,
        "entry of model 8: a LOAD has models 0..7",
    )
    yield (
        "bad_report_message_1025",
        raw(message="m" * 1025),
        WireErrorCode.TEXT_LENGTH,
        "report message of 1025 bytes",
    )
    yield (
        "bad_report_facts_33",
        raw(facts=tuple(Option(k, 1) for k in ids("fact", 33))),
        WireErrorCode.TOO_MANY_OPTIONS,
        "33 facts",
    )
    yield (
        "bad_report_entries_17",
        raw(entries=tuple(ReportEntry(n, 0) for n in ids("B", 17))),
        WireErrorCode.TOO_MANY_BACKENDS,
        "17 entries",
    )
    yield (
        "bad_entry_options_65",
        raw(entries=(probe_entry("ProbeA", {k: 1 for k in ids("key", 65)}),)),
        WireErrorCode.TOO_MANY_OPTIONS,
        "entry with 65 options",
    )
    yield (
        "bad_entry_name_64",
        raw(entries=(probe_entry("N" * 64, {}),)),
        WireErrorCode.ID_LENGTH,
        "entry name of 64 bytes",
    )
    yield (
        "bad_entry_name_empty",
        raw(entries=(entry, probe_entry("", {}))),
        WireErrorCode.ID_LENGTH,
        "second entry's name empty",
    )
    yield (
        "bad_report_fact_key_64",
        raw(facts=(Option("f" * 64, 1),)),
        WireErrorCode.KEY_LENGTH,
        "fact key of 64 bytes",
    )
    yield (
        "bad_report_fact_string_256",
        raw(facts=(Option("f", "v" * 256),)),
        WireErrorCode.STRING_LENGTH,
        "fact string of 256 bytes",
    )
    yield (
        "bad_report_int_range",
        raw(entries=(probe_entry("ProbeA", {"n": -(2**31) - 1}),)),
        WireErrorCode.INT_RANGE,
        "entry option int below int32",
    )
    yield (
        "bad_report_nul_in_message",
        raw(message="bad\0news"),
        WireErrorCode.NUL,
        "NUL inside the report message",
    )
    yield (
        "bad_report_nul_in_name",
        raw(entries=(probe_entry("Probe\0A", {}),)),
        WireErrorCode.NUL,
        "NUL inside an entry name",
    )
    named = raw(message="msgM", entries=(probe_entry("ProbeA", {"keyK": "valueV"}),))
    yield (
        "bad_report_utf8_in_name",
        patched(named, b"ProbeA", b"Probe\xc0"),
        WireErrorCode.UTF8,
        "byte C0 in an entry name",
    )
    yield (
        "bad_report_utf8_in_message",
        patched(named, b"msgM", b"msg\xed"),
        WireErrorCode.UTF8,
        "message ends inside a 3-byte sequence",
    )
    yield (
        "bad_report_surrogate_in_value",
        patched(named, b"valueV", b"val\xed\xb2\x80"),
        WireErrorCode.UTF8,
        "surrogate U+DC80 in an entry's string option",
    )
    yield (
        "bad_report_tag_4",
        patched(named, b"keyK\x03", b"keyK\x04"),
        WireErrorCode.TAG,
        "entry option with tag 4",
    )
    yield (
        "bad_report_bool_2",
        patched(raw(facts=(Option("factF", True),)), b"factF\x01\x01", b"factF\x01\x02"),
        WireErrorCode.BOOL,
        "fact bool byte 2",
    )
    yield (
        "bad_report_trailing",
        seal(named[:-4] + b"\0\0"),
        WireErrorCode.TRAILING,
        "two bytes after the last entry",
    )
    yield (
        "bad_report_truncated_entry",
        seal(named[: named.index(b"ProbeA") + 6 + 5]),
        WireErrorCode.TRUNCATED,
        "body ends inside an entry's fixed fields",
    )
    one_entry = raw(entries=(entry,))
    yield (
        "bad_report_missing_entries",
        seal(one_entry[: one_entry.index(b"ProbeA") - 2]),
        WireErrorCode.TRUNCATED,
        "entry count 1 and no entry",
    )


# ------------------------------------------------------------------------ streams

STREAM_DIR = HERE / "stream"
FRAMED_MAX_MESSAGE = 4096  # framed answers hold for devices that accept this much (the MCU's)


@dataclass(frozen=True)
class Answer:
    """The report a device owes one unit of a stream: a served request or a refusal."""

    size: int  # bytes of the unit; units follow each other from offset 0
    seq: int
    outcome: Action | WireErrorCode  # the action served, or the error of the REJECTED report

    def readable(self, start: int) -> dict[str, object]:
        span = [start, start + self.size]
        if isinstance(self.outcome, Action):
            return {"span": span, "seq": self.seq, "action": self.outcome.name.lower()}
        return {"span": span, "seq": self.seq, "error": self.outcome.name}


def hello(seq: int) -> bytes:
    return encode_request(request(Action.HELLO, seq=seq))


def reset(seq: int) -> bytes:
    return encode_request(request(Action.RESET, seq=seq))


def u32_at(data: bytes, offset: int) -> int:
    return int(struct.unpack_from("<I", data, offset)[0])


def retyped(frame: bytes, offset: int, value: int) -> bytes:
    """``frame`` with header byte ``offset`` set to ``value``, resealed."""
    return seal(frame[:offset] + bytes([value]) + frame[offset + 1 : -4])


def streams() -> Iterator[tuple[str, bytes, list[Answer], str]]:
    """(name, stream, answers, about); the answers are written out by hand from the spec."""
    s, t = WireErrorCode, WireErrorCode.TRUNCATED
    h, r = Action.HELLO, Action.RESET
    n = len(hello(1))  # every HELLO request (and stream offsets below) depends on it
    yield "empty", b"", [], "no bytes: the stream ends without a report"
    yield (
        "two_messages",
        hello(1) + reset(2),
        [Answer(n, 1, h), Answer(len(reset(2)), 2, r)],
        "two requests back to back: two reports",
    )
    yield (
        "short_garbage_at_end",
        b"xyz",
        [Answer(3, 0, t)],
        (
            "3 bytes, then the end: TRUNCATED, not BAD_MAGIC; a header is judged only once its "
            "16 bytes are at hand"
        ),
    )
    yield (
        "partial_header_at_end",
        b"ETBO\x01",
        [Answer(5, 0, t)],
        "the start of a header, then the end: TRUNCATED, seq 0",
    )
    yield (
        "message_then_short_tail",
        hello(1) + b"\x00\x01",
        [Answer(n, 1, h), Answer(2, 0, t)],
        "a request, then 2 bytes and the end",
    )
    yield (
        "truncated_message_at_end",
        hello(16)[:20],
        [Answer(20, 16, t)],
        "a valid header, then the end 5 bytes before its length: TRUNCATED with its seq",
    )
    garbage = b"\x00garbage\xff"
    stream = garbage + hello(43)
    yield (
        "short_garbage_then_message",
        stream,
        [Answer(len(garbage), u32_at(stream, 12), s.BAD_MAGIC), Answer(n, 43, h)],
        (
            "9 stray bytes, then a request: BAD_MAGIC for the 16 bytes judged (seq = their bytes "
            "12..15, which belong to the request), then the request's report"
        ),
    )
    yield (
        "long_garbage_is_one_unit",
        b"\xaa" * 100 + hello(2),
        [Answer(100, 0xAAAAAAAA, s.BAD_MAGIC), Answer(n, 2, h)],
        "100 bytes of garbage cost one report, however many 16-byte windows they span",
    )
    partial = b"xE ET ETB ETBX ETB"
    yield (
        "garbage_with_partial_magics",
        partial + hello(3),
        [Answer(len(partial), u32_at(partial, 12), s.BAD_MAGIC), Answer(n, 3, h)],
        "garbage holding E, ET, ETB and ETBX, then ETB right before a request's ETBO",
    )
    yield (
        "garbage_to_end",
        b"\xaa" * 20 + b"ETB",
        [Answer(23, 0xAAAAAAAA, s.BAD_MAGIC)],
        "garbage to the end of the input, ending in ETB: one unit, one report",
    )
    yield (
        "garbage_then_magic_at_end",
        b"\xaa" * 20 + b"ETBO\x01",
        [Answer(20, 0xAAAAAAAA, s.BAD_MAGIC), Answer(5, 0, t)],
        "garbage, then a magic and one byte at the end: BAD_MAGIC, then TRUNCATED",
    )
    stray = hello(26) + b"\x00" + hello(27)
    yield (
        "stray_byte_between_messages",
        stray,
        [Answer(n, 26, h), Answer(1, u32_at(stray, n + 12), s.BAD_MAGIC), Answer(n, 27, h)],
        "one zero byte between two requests: one BAD_MAGIC report between theirs",
    )
    runs = b"ab" + hello(24) + b"cd" + reset(25)
    yield (
        "one_report_per_run",
        runs,
        [
            Answer(2, u32_at(runs, 12), s.BAD_MAGIC),
            Answer(n, 24, h),
            Answer(2, u32_at(runs, n + 2 + 12), s.BAD_MAGIC),
            Answer(len(reset(25)), 25, r),
        ],
        "two runs of garbage, each before a request: one report per run",
    )
    flagged_report = header(msg_type=2, flags=1) + b"\0" * 5
    assert flagged_report.hex() == "4554424f0202010015000000010000000000000000"  # issue 11
    yield (
        "report_type_with_flags",
        flagged_report + hello(2),
        [Answer(21, 1, s.MSG_TYPE), Answer(n, 2, h)],
        (
            "a report-typed header with flags 1 and a usable length (the message vector "
            "bad_order_type_before_flags): MSG_TYPE, not FLAGS; its 21 bytes are skipped"
        ),
    )
    yield (
        "report_type_with_bad_length",
        header(msg_type=2, flags=1, length=5) + hello(3),
        [Answer(16, 1, s.MSG_TYPE), Answer(n, 3, h)],
        (
            "a report-typed header with flags and length 5: MSG_TYPE, then the length is "
            "unusable, so the reader looks for the next magic"
        ),
    )
    a_report = encode_report(report(Action.HELLO, seq=9))
    yield (
        "report_skipped_whole",
        a_report + hello(4),
        [Answer(len(a_report), 9, s.MSG_TYPE), Answer(n, 4, h)],
        "a whole valid report sent to a device: MSG_TYPE, skipped by its length",
    )
    yield (
        "version_1_skipped_whole",
        retyped(hello(5), 4, 1) + hello(6),
        [Answer(n, 5, s.VERSION), Answer(n, 6, h)],
        "a version-1 message (the layout before version 2): VERSION, skipped by its length",
    )
    yield (
        "unknown_type_skipped_whole",
        retyped(hello(21), 5, 3) + hello(22),
        [Answer(n, 21, s.MSG_TYPE), Answer(n, 22, h)],
        "a message of type 3: MSG_TYPE, skipped by its length",
    )
    yield (
        "refused_header_answered_at_end",
        (header(version=1, length=100, seq=7) + b"\0" * 20)[:30],
        [Answer(30, 7, s.VERSION)],
        (
            "a version-1 header of length 100, then the end after 30 bytes: VERSION, not "
            "TRUNCATED; a refused header is answered when its 16 bytes are read"
        ),
    )
    yield (
        "flags_header_alone_at_end",
        header(flags=1, length=25, seq=8),
        [Answer(16, 8, s.FLAGS)],
        "16 bytes: a header with flags 1 and length 25, then the end: FLAGS",
    )
    hidden = hello(10)
    yield (
        "skipped_unit_hides_a_message",
        header(version=1, length=16 + len(hidden) + 4, seq=9) + hidden + b"\0" * 4 + hello(11),
        [Answer(16 + len(hidden) + 4, 9, s.VERSION), Answer(n, 11, h)],
        (
            "a version-1 message whose body holds a whole request: the request inside is skipped "
            "unseen; the next one is served"
        ),
    )
    yield (
        "length_20_resynchronises",
        header(length=20, seq=12) + hello(13),
        [Answer(16, 12, s.LENGTH), Answer(n, 13, h)],
        (
            "length field 20: LENGTH; the next message cannot be located, so the reader looks "
            "for the next magic"
        ),
    )
    above = header(length=MAX_MESSAGE + 1, seq=14) + b"\x07" + b"\0" * 8
    yield (
        "length_above_max_resynchronises",
        above + hello(15),
        [Answer(len(above), 14, s.LENGTH), Answer(n, 15, h)],
        "length field 1048577: LENGTH, then the bytes up to the next magic are one unit",
    )
    inside = header(length=u32_at(b"ETBO", 0), seq=WIRE_VERSION)  # seq: the inner version
    yield (
        "magic_inside_refused_header",
        inside + hello(2),
        [
            Answer(8, WIRE_VERSION, s.LENGTH),
            Answer(8, u32_at(hello(2), 4), s.MSG_TYPE),
            Answer(n, 2, h),
        ],
        (
            "a header whose length field reads ETBO: LENGTH; the search from its second byte "
            "finds that ETBO, whose 16 bytes (type 0, length ETBO again) are MSG_TYPE; the search "
            "from there finds the request"
        ),
    )
    bad_crc = bytearray(hello(17))
    bad_crc[-1] ^= 0xFF
    yield (
        "crc_error_keeps_sync",
        bytes(bad_crc) + hello(18),
        [Answer(n, 17, s.CRC), Answer(n, 18, h)],
        "a request with a bad CRC: CRC, and the next request is found by length",
    )
    yield (
        "body_error_keeps_sync",
        retyped(hello(19), HEADER_SIZE, 99) + hello(20),
        [Answer(n, 19, s.ACTION), Answer(n, 20, h)],
        "a request with action 99: ACTION, and the next request is found by length",
    )


def _unit_answer(unit: StreamUnit) -> tuple[int, Action | WireErrorCode]:
    """What a device answers a unit the Python reader cut: (seq, action or error)."""
    if not isinstance(unit, StreamMessage):
        return unit.seq, unit.error.code
    try:
        decoded = decode_request(unit.data)
    except WireError as exc:
        return u32_at(unit.data, 12), exc.code
    return decoded.seq, decoded.action


def _framed_answer(data: bytes) -> dict[str, object]:
    """What a framed device answers ``data`` delivered as one link message."""
    try:
        decoded = decode_request(data)
    except WireError as exc:
        seq = u32_at(data, 12) if len(data) >= HEADER_SIZE else 0
        return {"seq": seq, "error": exc.code.name}
    return {"seq": decoded.seq, "action": decoded.action.name.lower()}


def stream_vector(name: str, stream: bytes, answers: list[Answer], about: str) -> Vector:
    """The vector, after checking that harness.codec.wire.stream_reader cuts and answers it
    as written."""
    expected = [(a.seq, a.outcome) for a in answers]
    starts = [sum(a.size for a in answers[:i]) for i in range(len(answers))]
    assert sum(a.size for a in answers) == len(stream), f"{name}: units do not cover the stream"
    whole = StreamReader(MessageType.REQUEST)
    units = whole.feed(stream) + whole.end()
    assert [_unit_answer(u) for u in units] == expected, f"{name}: {units}"
    assert [u.offset for u in units] == starts, f"{name}: unit offsets {units}"
    trickle = StreamReader(MessageType.REQUEST)
    units = [u for i in range(len(stream)) for u in trickle.feed(stream[i : i + 1])]
    assert [_unit_answer(u) for u in units + trickle.end()] == expected, f"{name}: byte by byte"
    readable = []
    for start, answer in zip(starts, answers, strict=True):
        entry = answer.readable(start)
        unit = stream[start : start + answer.size]
        assert len(unit) <= FRAMED_MAX_MESSAGE, f"{name}: a unit too long for a framed device"
        framed = _framed_answer(unit)
        if framed != {k: v for k, v in entry.items() if k != "span"}:
            assert len(unit) < HEADER_SIZE and framed == {"seq": 0, "error": "TRUNCATED"}, name
            entry["framed"] = framed
        readable.append(entry)
    return Vector(name, stream, {"expect": "request", "about": about, "answers": readable})


def build_streams() -> list[Vector]:
    """Every stream vector, in a fixed order."""
    vectors = [stream_vector(*fields) for fields in streams()]
    names = [v.name for v in vectors]
    assert len(set(names)) == len(names), "stream vector names used twice"
    return vectors


# ------------------------------------------------------------------------ program upload


def valid_uploads() -> Iterator[tuple[str, ProgramUpload]]:
    """Actions 9 and 10 (docs/wire-format.md, "Program upload"): bodies of their own."""
    # Chunk bytes are any bytes: a NUL, invalid UTF-8 and the magic are all just data.
    yield "req_program_data", ProgramData(0, b"\x00ETBO\xff", seq=13)
    yield "req_program_data_empty_chunk", ProgramData(4096, b"", seq=15)
    yield "req_program_end", ProgramEnd(6, 0x4C430B86, seq=14)


def upload_body_errors() -> Iterator[tuple[str, bytes, WireErrorCode, str, str]]:
    """(name, bytes, error, expect, about): upload bodies, and who reads actions 9 and 10."""
    chunk = encode_upload(ProgramData(0, b"abcd", seq=1))[:-4]
    end = encode_upload(ProgramEnd(4, 0xED82CD11, seq=1))[:-4]
    length_at = HEADER_SIZE + 1 + 4
    yield (
        "bad_program_data_length_past_body",
        seal(chunk[:length_at] + struct.pack("<H", 5) + chunk[length_at + 2 :]),
        WireErrorCode.TRUNCATED,
        "upload",
        "PROGRAM_DATA whose length (5) runs past its 4 bytes: the body ends before its bytes",
    )
    yield (
        "bad_program_data_no_length",
        seal(chunk[: length_at + 1]),
        WireErrorCode.TRUNCATED,
        "upload",
        "PROGRAM_DATA ending inside its u16 length",
    )
    yield (
        "bad_program_data_trailing",
        seal(chunk + b"\x00"),
        WireErrorCode.TRAILING,
        "upload",
        "PROGRAM_DATA with a byte after its chunk",
    )
    yield (
        "bad_program_end_truncated",
        seal(end[:-1]),
        WireErrorCode.TRUNCATED,
        "upload",
        "PROGRAM_END ending inside its crc",
    )
    yield (
        "bad_program_end_trailing",
        seal(end + b"\x00"),
        WireErrorCode.TRAILING,
        "upload",
        "PROGRAM_END with a byte after its crc",
    )
    yield (
        "bad_upload_action_8",
        encode_request(request(Action.REBOOT, seq=1)),
        WireErrorCode.ACTION,
        "upload",
        "a REBOOT given to the upload decoder, which reads actions 9 and 10 only",
    )
    for name, data in (("9", chunk), ("10", end)):
        yield (
            f"bad_request_action_{name}",
            seal(data),
            WireErrorCode.ACTION,
            "request",
            f"action {name} to a device without uploads: ACTION at the action byte, whatever "
            "follows (a device with uploads reads it with the upload decoder)",
        )


# ------------------------------------------------------------------------ assembly


def _decode(data: bytes, expect: str) -> Request | Report | ProgramUpload:
    if expect == "upload":
        return decode_upload(data)
    return decode_request(data) if expect == "request" else decode_report(data)


def valid(name: str, msg: Request | Report | ProgramUpload) -> Vector:
    if isinstance(msg, (ProgramData, ProgramEnd)):
        data, expect = encode_upload(msg), "upload"
    elif isinstance(msg, Request):
        data, expect = encode_request(msg), "request"
    else:
        data, expect = encode_report(msg), "report"
    expected = to_readable(msg)
    decoded = to_readable(_decode(data, expect))
    assert decoded == expected and json.dumps(decoded) == json.dumps(expected), name
    return Vector(name, data, expected)


def invalid(name: str, data: bytes, error: WireErrorCode, expect: str, about: str) -> Vector:
    try:
        _decode(data, expect)
    except WireError as exc:
        assert exc.code is error, f"{name}: expected {error.name}, decoder says {exc}"
    else:
        raise AssertionError(f"{name}: decodes, but should fail with {error.name}")
    return Vector(name, data, {"error": error.name, "expect": expect, "about": about})


def build() -> list[Vector]:
    """Every golden vector, in a fixed order."""
    vectors = [valid(name, msg) for name, msg in valid_requests()]
    vectors += [valid(name, msg) for name, msg in valid_uploads()]
    vectors += [valid(name, msg) for name, msg in valid_reports()]
    vectors += [invalid(n, d, e, x, a) for n, d, e, x, a in header_errors()]
    vectors += [invalid(n, d, e, "request", a) for n, d, e, a in request_body_errors()]
    vectors += [invalid(n, d, e, "report", a) for n, d, e, a in report_body_errors()]
    vectors += [invalid(n, d, e, x, a) for n, d, e, x, a in upload_body_errors()]
    names = [v.name for v in vectors]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"vector names used twice: {duplicates}"
    return vectors


def expected_files() -> dict[str, bytes]:
    """File name -> content of everything this script writes here."""
    files: dict[str, bytes] = {}
    for vector in build():
        files.update(vector.files())
    return files


def expected_stream_files() -> dict[str, bytes]:
    """File name -> content of everything this script writes into stream/."""
    files: dict[str, bytes] = {}
    for vector in build_streams():
        files.update(vector.files())
    return files


def write(directory: Path, files: dict[str, bytes]) -> None:
    directory.mkdir(exist_ok=True)
    for stale in [*directory.glob("*.bin"), *directory.glob("*.json")]:
        stale.unlink()
    for name, content in files.items():
        (directory / name).write_bytes(content)
    print(f"wrote {len(files) // 2} vectors to {directory}")


def main(directory: Path = HERE) -> int:
    write(directory, expected_files())
    write(directory / STREAM_DIR.name, expected_stream_files())
    return 0


if __name__ == "__main__":
    sys.exit(main())
