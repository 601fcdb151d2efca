"""The portable C codec (agent/codec) against wire format v2 and the golden vectors.

The codec is built with gcc here: ``etb_wiretool`` (with ASan and UBSan) checks every
golden vector in ``tests/vectors``; a shared library driven through ctypes checks error
order on crafted messages, the encoder's limits, capacity handling and truncation, and
that it refuses mutated messages with the same error as the Python codec (harness.codec.wire).
Cross builds prove the sources stay warning-free C99 and freestanding on Cortex-M3.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from golden_vectors import VECTORS, decoder_kind, load_vector, vector_names
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.codec import wire as python_wire

ROOT = Path(__file__).resolve().parents[2]
CODEC = ROOT / "agent" / "codec"
SOURCES = sorted((CODEC / "src").glob("*.c"))
TOOL_SOURCE = CODEC / "tools" / "etb_wiretool.c"
BUILD_TIMEOUT_S = 120
STRICT_FLAGS = [
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-Wconversion",
    "-Wsign-conversion",
    "-Wshadow",
    "-Wcast-qual",
    "-Wstrict-prototypes",
    "-Wmissing-prototypes",
]
CORTEX_M3_FLAGS = [
    "-mcpu=cortex-m3",
    "-mthumb",
    "-ffreestanding",
    "-Os",
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pedantic",
    "-Wconversion",
]
ALLOCATORS = {"malloc", "free", "calloc", "realloc"}

STATUS_NAMES = [
    "OK",
    "TRUNCATED",
    "BAD_MAGIC",
    "VERSION",
    "MSG_TYPE",
    "FLAGS",
    "LENGTH",
    "CRC",
    "TRAILING",
    "ACTION",
    "TAG",
    "BOOL",
    "INT_RANGE",
    "KEY_LENGTH",
    "STRING_LENGTH",
    "ID_LENGTH",
    "UTF8",
    "NUL",
    "TOO_MANY_BACKENDS",
    "TOO_MANY_OPTIONS",
    "DUPLICATE_KEY",
    "DUPLICATE_BACKEND",
    "UNEXPECTED_FIELD",
    "TOO_MANY_DELEGATES",
    "TEXT_LENGTH",
    "OUTCOME",
    "CAPACITY",
    "LOAD_PATH",
    "TOO_MANY_MODELS",
]
REQUEST, REPORT = 1, 2
LOAD, EXECUTE, SET, GET, RESET, REGISTER, HELLO = range(1, 8)
BOOL, INT, STRING = 1, 2, 3
POOL_SIZE = 32 + 16 * 64


def run(argv: Sequence[str | Path]) -> subprocess.CompletedProcess[bytes]:
    """Run a build command; a failure shows the compiler's output."""
    result = subprocess.run(
        [str(a) for a in argv], capture_output=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, argv))} failed ({result.returncode}):\n"
        f"{result.stdout.decode(errors='replace')}{result.stderr.decode(errors='replace')}"
    )
    return result


# --- messages built byte by byte, independently of the codecs under test -------------


def text(value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return struct.pack("<H", len(data)) + data


def opt(key: bytes | str, tag: int, value: bytes) -> bytes:
    return text(key) + bytes([tag]) + value


def opt_bool(key: str, value: bool) -> bytes:
    return opt(key, BOOL, bytes([value]))


def opt_int(key: str, value: int) -> bytes:
    return opt(key, INT, struct.pack("<q", value))


def opt_str(key: str, value: bytes | str) -> bytes:
    return opt(key, STRING, text(value))


def backend(backend_id: bytes | str, options: Sequence[bytes] = ()) -> bytes:
    return text(backend_id) + bytes([len(options)]) + b"".join(options)


def request_body(
    action: int,
    program: bytes | str = b"",
    delegates: Sequence[str] = (),
    backends: Sequence[bytes] = (),
    load_fields: bytes = b"\x00\x00\x00\x00\x00\x00",
) -> bytes:
    """A request body; a LOAD's body ends with ``load_fields`` (path program, no flags,
    method "forward", no method map, no further models by default)."""
    return (
        bytes([action])
        + text(program)
        + bytes([len(delegates)])
        + b"".join(text(d) for d in delegates)
        + bytes([len(backends)])
        + b"".join(backends)
        + (load_fields if action == LOAD else b"")
    )


def entry(
    name: bytes | str,
    options: Sequence[bytes] = (),
    status: int = 0,
    calls: int = 1,
    executes: int = 0,
    flags: int = 1,
    model: int = 0,
) -> bytes:
    return (
        text(name)
        + struct.pack("<IHHBB", status, calls, executes, flags, model)
        + bytes([len(options)])
        + b"".join(options)
    )


def report_body(
    action: int = LOAD,
    outcome: int = 0,
    detail: int = 0,
    message: bytes | str = b"",
    facts: Sequence[bytes] = (),
    entries: Sequence[bytes] = (),
) -> bytes:
    return (
        bytes([action, outcome])
        + struct.pack("<I", detail)
        + text(message)
        + bytes([len(facts)])
        + b"".join(facts)
        + bytes([len(entries)])
        + b"".join(entries)
    )


def frame(
    msg_type: int,
    body: bytes,
    seq: int = 7,
    *,
    magic: bytes = b"ETBO",
    version: int = 2,
    flags: int = 0,
    length: int | None = None,
    bad_crc: bool = False,
) -> bytes:
    size = 16 + len(body) + 4 if length is None else length
    head = magic + struct.pack("<BBHII", version, msg_type, flags, size, seq) + body
    crc = zlib.crc32(head) ^ (0xFFFFFFFF if bad_crc else 0)
    return head + struct.pack("<I", crc)


def request(action: int, *args: object, **kwargs: object) -> bytes:
    return frame(REQUEST, request_body(action, *args, **kwargs))  # type: ignore[arg-type]


def report(**kwargs: object) -> bytes:
    return frame(REPORT, report_body(**kwargs))  # type: ignore[arg-type]


# --- ctypes view of etb/wire.h ----------------------------------------------------------


class Str(ctypes.Structure):
    _fields_ = [("ptr", ctypes.POINTER(ctypes.c_uint8)), ("len", ctypes.c_uint16)]

    def bytes(self) -> bytes:
        return ctypes.string_at(self.ptr, self.len) if self.len else b""


class Option(ctypes.Structure):
    _fields_ = [
        ("key", Str),
        ("type", ctypes.c_uint8),
        ("b", ctypes.c_bool),
        ("i", ctypes.c_int32),
        ("s", Str),
    ]


class Backend(ctypes.Structure):
    _fields_ = [("id", Str), ("option_count", ctypes.c_uint8), ("options", ctypes.POINTER(Option))]


class Load(ctypes.Structure):
    _fields_ = [
        ("path", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),
        ("method", Str),
        ("method_backend_count", ctypes.c_uint8),
        ("method_backends", Backend * 8),
    ]


class Model(ctypes.Structure):
    _fields_ = [
        ("program", Str),
        ("delegate_count", ctypes.c_uint8),
        ("delegates", Str * 8),
        ("backend_count", ctypes.c_uint8),
        ("backends", Backend * 8),
        ("load", Load),
    ]


class Request(ctypes.Structure):
    _fields_ = [
        ("seq", ctypes.c_uint32),
        ("action", ctypes.c_uint8),
        ("program", Str),
        ("delegate_count", ctypes.c_uint8),
        ("delegates", Str * 8),
        ("backend_count", ctypes.c_uint8),
        ("backends", Backend * 16),
        ("load", Load),
        ("model_count", ctypes.c_uint8),
        ("models", Model * 7),
    ]


class Entry(ctypes.Structure):
    _fields_ = [
        ("name", Str),
        ("status", ctypes.c_uint32),
        ("calls", ctypes.c_uint16),
        ("executes", ctypes.c_uint16),
        ("flags", ctypes.c_uint8),
        ("model", ctypes.c_uint8),
        ("option_count", ctypes.c_uint8),
        ("options", ctypes.POINTER(Option)),
    ]


class Report(ctypes.Structure):
    _fields_ = [
        ("seq", ctypes.c_uint32),
        ("action", ctypes.c_uint8),
        ("outcome", ctypes.c_uint8),
        ("detail", ctypes.c_uint32),
        ("message", Str),
        ("fact_count", ctypes.c_uint8),
        ("facts", ctypes.POINTER(Option)),
        ("entry_count", ctypes.c_uint8),
        ("entries", Entry * 16),
    ]


@dataclass(frozen=True)
class Decoded:
    """A decode result; keeps the input buffer and the pool alive for the views."""

    status: str
    message: Request | Report
    buffer: ctypes.Array[ctypes.c_char]
    pool: ctypes.Array[Option]


class Codec:
    """The C codec, loaded from a shared library."""

    def __init__(self, path: Path) -> None:
        self.lib = ctypes.CDLL(str(path))
        size_p = ctypes.POINTER(ctypes.c_size_t)
        for name, struct_type in (("request", Request), ("report", Report)):
            decode = getattr(self.lib, f"etb_decode_{name}")
            decode.argtypes = [
                ctypes.c_char_p,
                ctypes.c_size_t,
                ctypes.POINTER(struct_type),
                ctypes.POINTER(Option),
                ctypes.c_size_t,
            ]
            encode = getattr(self.lib, f"etb_encode_{name}")
            encode.argtypes = [
                ctypes.POINTER(struct_type),
                ctypes.c_char_p,
                ctypes.c_size_t,
                size_p,
            ]
        self.lib.etb_crc32.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.etb_crc32.restype = ctypes.c_uint32
        self.lib.etb_status_name.argtypes = [ctypes.c_int]
        self.lib.etb_status_name.restype = ctypes.c_char_p

    def decode(self, data: bytes, msg_type: int = REQUEST, pool_cap: int = POOL_SIZE) -> Decoded:
        buffer = ctypes.create_string_buffer(data, len(data))
        pool = (Option * max(pool_cap, 1))()
        out: Request | Report = Request() if msg_type == REQUEST else Report()
        decode = self.lib.etb_decode_request if msg_type == REQUEST else self.lib.etb_decode_report
        status = decode(buffer, len(data), ctypes.byref(out), pool, pool_cap)
        return Decoded(STATUS_NAMES[status], out, buffer, pool)

    def encode(self, message: Request | Report, cap: int = 1 << 20) -> tuple[str, bytes, int]:
        """(status, bytes written, out_len)."""
        buffer = ctypes.create_string_buffer(max(cap, 1))
        out_len = ctypes.c_size_t(0)
        encode = (
            self.lib.etb_encode_request
            if isinstance(message, Request)
            else self.lib.etb_encode_report
        )
        status = STATUS_NAMES[encode(ctypes.byref(message), buffer, cap, ctypes.byref(out_len))]
        return status, buffer.raw[: out_len.value] if status == "OK" else b"", out_len.value


# --- builds -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("c_codec")


@pytest.fixture(scope="session")
def wiretool(build_dir: Path) -> Path:
    """etb_wiretool with AddressSanitizer and UndefinedBehaviorSanitizer."""
    tool = build_dir / "etb_wiretool"
    run(
        [
            "gcc",
            *STRICT_FLAGS,
            "-O1",
            "-g",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            f"-I{CODEC / 'include'}",
            *SOURCES,
            TOOL_SOURCE,
            "-o",
            tool,
        ]
    )
    return tool


@pytest.fixture(scope="session")
def codec(build_dir: Path) -> Codec:
    """The codec as a shared library with UBSan (ASan cannot be loaded into Python)."""
    library = build_dir / "libetb_wire.so"
    run(
        [
            "gcc",
            *STRICT_FLAGS,
            "-O1",
            "-g",
            "-fPIC",
            "-shared",
            "-fsanitize=undefined",
            "-fno-sanitize-recover=all",
            f"-I{CODEC / 'include'}",
            *SOURCES,
            "-o",
            library,
        ]
    )
    return Codec(library)


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_builds_warning_free_on_host(compiler: str, tmp_path: Path) -> None:
    for source in SOURCES:
        run(
            [
                compiler,
                *STRICT_FLAGS,
                "-O2",
                f"-I{CODEC / 'include'}",
                "-c",
                source,
                "-o",
                tmp_path / f"{source.stem}.o",
            ]
        )


def test_builds_freestanding_for_cortex_m3_without_allocation(tmp_path: Path) -> None:
    objects = []
    for source in SOURCES:
        obj = tmp_path / f"{source.stem}.o"
        run(
            [
                "arm-none-eabi-gcc",
                *CORTEX_M3_FLAGS,
                f"-I{CODEC / 'include'}",
                "-c",
                source,
                "-o",
                obj,
            ]
        )
        objects.append(obj)
    undefined = set(run(["arm-none-eabi-nm", "-u", "-j", *objects]).stdout.decode().split())
    defined = set(
        run(["arm-none-eabi-nm", "-j", "--defined-only", *objects]).stdout.decode().split()
    )
    assert not undefined & ALLOCATORS
    missing = {name for name in undefined - defined if not name.endswith(":")}
    assert not missing, f"the codec needs symbols from outside itself: {sorted(missing)}"


def test_cmake_builds_static_library_target(tmp_path: Path) -> None:
    cmake = shutil.which("cmake") or "cmake"
    run([cmake, "-S", CODEC, "-B", tmp_path, "-DCMAKE_BUILD_TYPE=Release"])
    run([cmake, "--build", tmp_path, "--target", "etb_wire", "-j2"])
    assert (tmp_path / "libetb_wire.a").is_file()


# --- golden vectors -----------------------------------------------------------------------


def test_golden_vectors_exist() -> None:
    assert vector_names(), f"no golden vectors in {VECTORS}"


def wiretool_run(
    tool: Path, command: str, kind: str, data: bytes
) -> subprocess.CompletedProcess[bytes]:
    """Run etb_wiretool on one message; a hang fails the test after 30 s."""
    return subprocess.run(
        [str(tool), command, kind], input=data, capture_output=True, timeout=30, check=False
    )


@pytest.mark.parametrize("name", vector_names())
def test_golden_vector(name: str, wiretool: Path) -> None:
    data, expected = load_vector(name)
    if "error" in expected:
        result = wiretool_run(wiretool, "decode", str(expected["expect"]), data)
        assert (result.returncode, result.stdout.decode().strip()) == (
            2,
            f"error {expected['error']}",
        ), result.stderr.decode()
        return
    kind = decoder_kind(expected)
    decoded = wiretool_run(wiretool, "decode", kind, data)
    assert decoded.returncode == 0, decoded.stdout.decode() + decoded.stderr.decode()
    assert json.loads(decoded.stdout) == expected
    reencoded = wiretool_run(wiretool, "reencode", kind, data)
    assert reencoded.returncode == 0, reencoded.stderr.decode()
    assert reencoded.stdout == data


def test_wiretool_prints_the_readable_form(wiretool: Path) -> None:
    result = wiretool_run(wiretool, "decode", "report", HELLO_REPORT)
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout) == {
        "type": "report",
        "seq": 7,
        "action": "hello",
        "outcome": "ok",
        "detail": 0,
        "message": 'h\u00e9llo "quoted"\n',
        "facts": [
            {"key": "agent_version", "type": "string", "value": "0.1"},
            {"key": "wire_version", "type": "int", "value": 1},
        ],
        "entries": [
            {
                "name": "ProbeA",
                "status": 0,
                "calls": 1,
                "executes": 0,
                "flags": 0,
                "model": 0,
                "options": [
                    {"key": "k", "type": "int", "value": 1},
                    {"key": "k", "type": "int", "value": 2},
                ],
            },
            {
                "name": "ProbeA",
                "status": 0x12,
                "calls": 65535,
                "executes": 3,
                "flags": 1,
                "model": 0,
                "options": [],
            },
        ],
    }
    result = wiretool_run(
        wiretool,
        "decode",
        "request",
        request(
            SET,
            backends=[
                backend("B", [opt_bool("on", False), opt_int("n", -5), opt_str("s", "\t\\")])
            ],
        ),
    )
    assert json.loads(result.stdout) == {
        "type": "request",
        "seq": 7,
        "action": "set",
        "program": "",
        "delegates": [],
        "backends": [
            {
                "id": "B",
                "options": [
                    {"key": "on", "type": "bool", "value": False},
                    {"key": "n", "type": "int", "value": -5},
                    {"key": "s", "type": "string", "value": "\t\\"},
                ],
            }
        ],
    }


def test_wiretool_names_the_error(wiretool: Path) -> None:
    result = wiretool_run(wiretool, "decode", "request", HELLO_REPORT)
    assert (result.returncode, result.stdout) == (2, b"error MSG_TYPE\n")
    result = wiretool_run(wiretool, "reencode", "request", b"ETB")
    assert (result.returncode, result.stdout) == (2, b"error TRUNCATED\n")


def valid_messages() -> Iterator[tuple[str, bytes, int, int]]:
    """(name, bytes, type, option count) of every valid vector and a few crafted ones."""
    for name in vector_names():
        data, expected = load_vector(name)
        if "error" not in expected and decoder_kind(expected) != "upload":
            yield (
                name,
                data,
                REQUEST if expected["type"] == "request" else REPORT,
                (count_options(expected)),
            )
    for name, (data, msg_type, options) in CRAFTED_VALID.items():
        yield name, data, msg_type, options


def count_options(readable: dict[str, Any]) -> int:
    groups = readable.get("backends", readable.get("entries", []))
    groups = [*groups, *readable.get("method_backends", [])]
    for model in readable.get("models", []):
        groups += [*model["backends"], *model["method_backends"]]
    count = sum(len(g["options"]) for g in groups)
    return count + len(readable.get("facts", []))


# --- crafted messages ---------------------------------------------------------------------

LOAD_REQUEST = request(
    LOAD,
    "/data/local/tmp/p.pte",
    ["ProbeA", "ProbeA"],
    [
        backend("ProbeA", [opt_int("threads", 4), opt_bool("fast", True), opt_str("mode", "perf")]),
        backend(
            "ProbeB",
            [
                opt_int("min", -(2**31)),
                opt_int("max", 2**31 - 1),
                opt_str("empty", ""),
                opt_str("wide", "\u00e9\u20ac\U0010ffff"),
            ],
        ),
    ],
)
HELLO_REPORT = report(
    action=HELLO,
    message='h\u00e9llo "quoted"\n',
    facts=[opt_str("agent_version", "0.1"), opt_int("wire_version", 1)],
    entries=[
        entry("ProbeA", [opt_int("k", 1), opt_int("k", 2)], flags=0),
        entry("ProbeA", status=0x12, calls=65535, executes=3),
    ],
)
CRAFTED_VALID = {
    "crafted_load": (LOAD_REQUEST, REQUEST, 7),
    "crafted_hello_report": (HELLO_REPORT, REPORT, 4),
    "crafted_register": (request(REGISTER, backends=[backend("A"), backend("B")]), REQUEST, 0),
    "crafted_hello": (request(HELLO), REQUEST, 0),
    "crafted_rejected": (report(action=0, outcome=1, detail=13), REPORT, 0),
}

LONG_ID = "i" * 64
CRAFTED_ERRORS: dict[str, tuple[bytes, int, str]] = {
    # header, in the order of decoding steps 1-5
    "empty": (b"", REQUEST, "TRUNCATED"),
    "15_bytes": (LOAD_REQUEST[:15], REQUEST, "TRUNCATED"),
    "magic_before_version": (
        frame(REQUEST, b"\x07", magic=b"ETBX", version=9),
        REQUEST,
        "BAD_MAGIC",
    ),
    "version_before_type": (frame(9, b"\x07", version=1), REQUEST, "VERSION"),
    "unknown_type": (frame(3, request_body(HELLO)), REQUEST, "MSG_TYPE"),
    "report_as_request": (report(), REQUEST, "MSG_TYPE"),
    "request_as_report": (request(HELLO), REPORT, "MSG_TYPE"),
    "type_before_flags": (frame(REPORT, request_body(HELLO), flags=1), REQUEST, "MSG_TYPE"),
    "flags_before_length": (frame(REQUEST, b"", flags=0x100, length=3), REQUEST, "FLAGS"),
    "length_20": (frame(REQUEST, request_body(HELLO), length=20), REQUEST, "LENGTH"),
    "length_over_max": (
        frame(REQUEST, request_body(HELLO), length=(1 << 20) + 1),
        REQUEST,
        "LENGTH",
    ),
    "header_only": (LOAD_REQUEST[:16], REQUEST, "TRUNCATED"),
    "buffer_short": (frame(REQUEST, request_body(HELLO), length=26), REQUEST, "TRUNCATED"),
    "buffer_long": (request(HELLO) + b"\0", REQUEST, "TRAILING"),
    "crc": (frame(REQUEST, request_body(HELLO), bad_crc=True), REQUEST, "CRC"),
    "crc_before_body": (frame(REQUEST, b"\x09\x01", bad_crc=True), REQUEST, "CRC"),
    # request body
    "body_1_byte": (frame(REQUEST, b"\x07"), REQUEST, "TRUNCATED"),
    "action_0": (frame(REQUEST, request_body(0)), REQUEST, "ACTION"),
    "action_11": (frame(REQUEST, b"\x0b"), REQUEST, "ACTION"),
    "program_runs_into_crc": (frame(REQUEST, b"\x01\x04\x00ab"), REQUEST, "TRUNCATED"),
    "program_on_hello": (request(HELLO, "p"), REQUEST, "UNEXPECTED_FIELD"),
    "program_on_hello_before_utf8": (request(HELLO, b"\xff"), REQUEST, "UNEXPECTED_FIELD"),
    "program_1025": (request(LOAD, "p" * 1025), REQUEST, "TEXT_LENGTH"),
    "program_nul_before_utf8": (request(LOAD, b"\xff\x00"), REQUEST, "NUL"),
    "program_utf8": (request(LOAD, b"/p\xc3"), REQUEST, "UTF8"),
    "delegates_9": (request(LOAD, "", ["d"] * 9), REQUEST, "TOO_MANY_DELEGATES"),
    "delegates_on_set": (request(SET, "", ["d"]), REQUEST, "UNEXPECTED_FIELD"),
    "delegate_empty": (request(LOAD, "", [""]), REQUEST, "ID_LENGTH"),
    "delegate_64": (request(LOAD, "", [LONG_ID]), REQUEST, "ID_LENGTH"),
    "count_before_elements": (frame(REQUEST, b"\x01\x00\x00\x09"), REQUEST, "TOO_MANY_DELEGATES"),
    "load_9_backends": (
        request(LOAD, backends=[backend(f"b{i}") for i in range(9)]),
        REQUEST,
        "TOO_MANY_BACKENDS",
    ),
    "set_17_backends": (
        request(SET, backends=[backend(f"b{i}") for i in range(17)]),
        REQUEST,
        "TOO_MANY_BACKENDS",
    ),
    "backends_on_execute": (request(EXECUTE, backends=[backend("b")]), REQUEST, "UNEXPECTED_FIELD"),
    "backends_on_reset": (request(RESET, backends=[backend("b")]), REQUEST, "UNEXPECTED_FIELD"),
    "backend_id_64": (request(SET, backends=[backend(LONG_ID)]), REQUEST, "ID_LENGTH"),
    "backend_id_nul": (request(SET, backends=[backend("a\0")]), REQUEST, "NUL"),
    "duplicate_backend": (
        request(GET, backends=[backend("b"), backend("b")]),
        REQUEST,
        "DUPLICATE_BACKEND",
    ),
    "duplicate_backend_before_count": (
        frame(REQUEST, bytes([SET]) + text("") + b"\x00\x02" + backend("b") + text("b")),
        REQUEST,
        "DUPLICATE_BACKEND",
    ),
    "options_65": (
        request(SET, backends=[backend("b", [opt_bool(f"k{i}", True) for i in range(65)])]),
        REQUEST,
        "TOO_MANY_OPTIONS",
    ),
    "options_on_register": (
        request(REGISTER, backends=[backend("b", [opt_bool("k", True)])]),
        REQUEST,
        "UNEXPECTED_FIELD",
    ),
    "key_empty": (
        request(SET, backends=[backend("b", [opt_bool("", True)])]),
        REQUEST,
        "KEY_LENGTH",
    ),
    "key_64": (
        request(SET, backends=[backend("b", [opt_bool("k" * 64, True)])]),
        REQUEST,
        "KEY_LENGTH",
    ),
    "key_surrogate": (
        request(SET, backends=[backend("b", [opt(b"\xed\xa0\x80", BOOL, b"\x01")])]),
        REQUEST,
        "UTF8",
    ),
    "duplicate_key_before_tag": (
        request(SET, backends=[backend("b", [opt_bool("k", True), opt("k", 9, b"")])]),
        REQUEST,
        "DUPLICATE_KEY",
    ),
    "duplicate_key_across_backends_ok_then_tag": (
        request(
            SET, backends=[backend("a", [opt_bool("k", True)]), backend("b", [opt("k", 0, b"")])]
        ),
        REQUEST,
        "TAG",
    ),
    "tag_4": (request(SET, backends=[backend("b", [opt("k", 4, b"\x01")])]), REQUEST, "TAG"),
    "bool_2": (request(SET, backends=[backend("b", [opt("k", BOOL, b"\x02")])]), REQUEST, "BOOL"),
    "int_2_31": (
        request(SET, backends=[backend("b", [opt_int("k", 2**31)])]),
        REQUEST,
        "INT_RANGE",
    ),
    "int_below_min": (
        request(SET, backends=[backend("b", [opt_int("k", -(2**31) - 1)])]),
        REQUEST,
        "INT_RANGE",
    ),
    "int_high_word": (
        request(SET, backends=[backend("b", [opt_int("k", 1 << 32)])]),
        REQUEST,
        "INT_RANGE",
    ),
    "int_short": (
        frame(REQUEST, request_body(SET, backends=[backend("b", [opt_int("k", 1)])])[:-4]),
        REQUEST,
        "TRUNCATED",
    ),
    "string_256": (
        request(SET, backends=[backend("b", [opt_str("k", "s" * 256)])]),
        REQUEST,
        "STRING_LENGTH",
    ),
    "string_nul": (request(SET, backends=[backend("b", [opt_str("k", "a\0b")])]), REQUEST, "NUL"),
    "trailing_body": (frame(REQUEST, request_body(HELLO) + b"\0"), REQUEST, "TRAILING"),
    # report body
    "report_action_11": (report(action=11), REPORT, "ACTION"),
    "report_action_before_outcome": (report(action=11, outcome=9), REPORT, "ACTION"),
    "report_outcome_4": (report(outcome=4), REPORT, "OUTCOME"),
    "report_detail_short": (frame(REPORT, b"\x01\x00\x00\x00"), REPORT, "TRUNCATED"),
    "report_message_1025": (report(message="m" * 1025), REPORT, "TEXT_LENGTH"),
    "report_message_overlong": (report(message=b"\xc0\x80"), REPORT, "UTF8"),
    "report_facts_33": (
        report(facts=[opt_int(f"f{i}", i) for i in range(33)]),
        REPORT,
        "TOO_MANY_OPTIONS",
    ),
    "report_fact_tag": (report(facts=[opt("f", 0, b"")]), REPORT, "TAG"),
    "report_entries_17": (
        report(entries=[entry(f"e{i}") for i in range(17)]),
        REPORT,
        "TOO_MANY_BACKENDS",
    ),
    "report_entry_name_empty": (report(entries=[entry("")]), REPORT, "ID_LENGTH"),
    "report_entry_flags": (report(entries=[entry("e", flags=3)]), REPORT, "FLAGS"),
    "report_entry_options_65": (
        report(entries=[entry("e", [opt_int("k", 0)] * 65)]),
        REPORT,
        "TOO_MANY_OPTIONS",
    ),
    "report_entry_string_256": (
        report(entries=[entry("e", [opt_str("k", "s" * 256)])]),
        REPORT,
        "STRING_LENGTH",
    ),
    "report_trailing": (frame(REPORT, report_body() + b"\0"), REPORT, "TRAILING"),
}


VALID_MESSAGES = list(valid_messages())
VALID_IDS = [m[0] for m in VALID_MESSAGES]


@pytest.mark.parametrize("name", sorted(CRAFTED_ERRORS))
def test_decoder_reports_the_first_failing_check(name: str, codec: Codec) -> None:
    data, msg_type, error = CRAFTED_ERRORS[name]
    assert codec.decode(data, msg_type).status == error


@pytest.mark.parametrize("name", sorted(CRAFTED_VALID))
def test_crafted_valid_message_round_trips(name: str, codec: Codec) -> None:
    data, msg_type, _ = CRAFTED_VALID[name]
    decoded = codec.decode(data, msg_type)
    assert decoded.status == "OK"
    assert codec.encode(decoded.message)[:2] == ("OK", data)


def test_decoded_fields_are_views_of_the_message(codec: Codec) -> None:
    decoded = codec.decode(LOAD_REQUEST)
    req = decoded.message
    assert isinstance(req, Request)
    assert (req.seq, req.action, req.program.bytes()) == (7, LOAD, b"/data/local/tmp/p.pte")
    assert [req.delegates[i].bytes() for i in range(req.delegate_count)] == [b"ProbeA"] * 2
    probe_b = req.backends[1]
    assert probe_b.id.bytes() == b"ProbeB"
    values = [
        (
            probe_b.options[i].key.bytes(),
            probe_b.options[i].type,
            probe_b.options[i].i,
            probe_b.options[i].s.bytes(),
        )
        for i in range(probe_b.option_count)
    ]
    assert values == [
        (b"min", INT, -(2**31), b""),
        (b"max", INT, 2**31 - 1, b""),
        (b"empty", STRING, 0, b""),
        (b"wide", STRING, 0, "\u00e9\u20ac\U0010ffff".encode()),
    ]


def test_header_is_available_when_the_message_is_refused(codec: Codec) -> None:
    decoded = codec.decode(frame(REQUEST, request_body(HELLO), seq=0xDEADBEEF, version=1))
    assert decoded.status == "VERSION"
    assert decoded.message.seq == 0xDEADBEEF


# --- CRC, names, capacity, truncation -----------------------------------------------------


def test_crc32_is_iso_hdlc(codec: Codec) -> None:
    assert codec.lib.etb_crc32(0, b"123456789", 9) == 0xCBF43926
    part = codec.lib.etb_crc32(0, b"1234", 4)
    assert codec.lib.etb_crc32(part, b"56789", 5) == 0xCBF43926
    data = bytes(range(256)) * 3
    assert codec.lib.etb_crc32(0, data, len(data)) == zlib.crc32(data)


def test_status_names(codec: Codec) -> None:
    names = [codec.lib.etb_status_name(code).decode() for code in range(len(STATUS_NAMES) + 1)]
    assert names == [*STATUS_NAMES, "UNKNOWN"]


@pytest.mark.parametrize("name, data, msg_type, options", VALID_MESSAGES, ids=VALID_IDS)
def test_option_pool_too_small_is_capacity(
    name: str, data: bytes, msg_type: int, options: int, codec: Codec
) -> None:
    assert codec.decode(data, msg_type, pool_cap=options).status == "OK", name
    if options:
        assert codec.decode(data, msg_type, pool_cap=options - 1).status == "CAPACITY"


@pytest.mark.parametrize("name, data, msg_type, options", VALID_MESSAGES, ids=VALID_IDS)
def test_encode_buffer_too_small_is_capacity_with_needed_size(
    name: str, data: bytes, msg_type: int, options: int, codec: Codec
) -> None:
    decoded = codec.decode(data, msg_type)
    assert decoded.status == "OK", name
    assert codec.encode(decoded.message, cap=len(data) - 1) == ("CAPACITY", b"", len(data))
    assert codec.encode(decoded.message, cap=len(data)) == ("OK", data, len(data))


@pytest.mark.parametrize("name, data, msg_type, options", VALID_MESSAGES, ids=VALID_IDS)
def test_every_truncation_is_truncated(
    name: str, data: bytes, msg_type: int, options: int, codec: Codec
) -> None:
    statuses = {codec.decode(data[:n], msg_type).status for n in range(len(data))}
    assert statuses == {"TRUNCATED"}, name


# --- encoder limits -----------------------------------------------------------------------


def encode_after(
    codec: Codec, data: bytes, msg_type: int, change: Callable[[Any, list[object]], None]
) -> str:
    """Decode a valid message, let change(message, keep) break it, encode it again.

    ``change`` takes the message ``msg_type`` says, a Request or a Report."""
    decoded = codec.decode(data, msg_type)
    assert decoded.status == "OK"
    keep: list[object] = []
    change(decoded.message, keep)
    return codec.encode(decoded.message)[0]


def view(data: bytes, keep: list[object]) -> Str:
    buffer = (ctypes.c_uint8 * max(len(data), 1)).from_buffer_copy(data.ljust(1, b"\0"))
    keep.append(buffer)
    return Str(ctypes.cast(buffer, ctypes.POINTER(ctypes.c_uint8)), len(data))


def set_key(index: int, key: bytes) -> Callable[[Request, list[object]], None]:
    def change(req: Request, keep: list[object]) -> None:
        req.backends[0].options[index].key = view(key, keep)

    return change


ENCODER_ERRORS = {
    "action_0": (REQUEST, lambda m, k: setattr(m, "action", 0), "ACTION"),
    "action_11": (REQUEST, lambda m, k: setattr(m, "action", 11), "ACTION"),
    "program_on_set": (REQUEST, lambda m, k: setattr(m, "action", SET), "UNEXPECTED_FIELD"),
    "program_1025": (
        REQUEST,
        lambda m, k: setattr(m, "program", view(b"p" * 1025, k)),
        "TEXT_LENGTH",
    ),
    "program_null_view": (REQUEST, lambda m, k: setattr(m, "program", Str(None, 3)), "CAPACITY"),
    "delegates_9": (REQUEST, lambda m, k: setattr(m, "delegate_count", 9), "TOO_MANY_DELEGATES"),
    "delegate_empty": (REQUEST, lambda m, k: m.delegates.__setitem__(1, Str(None, 0)), "ID_LENGTH"),
    "load_backends_9": (REQUEST, lambda m, k: setattr(m, "backend_count", 9), "TOO_MANY_BACKENDS"),
    "duplicate_backend": (
        REQUEST,
        lambda m, k: setattr(m.backends[1], "id", m.backends[0].id),
        "DUPLICATE_BACKEND",
    ),
    "options_65": (
        REQUEST,
        lambda m, k: setattr(m.backends[0], "option_count", 65),
        "TOO_MANY_OPTIONS",
    ),
    "options_null": (REQUEST, lambda m, k: setattr(m.backends[0], "options", None), "CAPACITY"),
    "key_64": (REQUEST, set_key(1, b"k" * 64), "KEY_LENGTH"),
    "key_nul": (REQUEST, set_key(1, b"k\0"), "NUL"),
    "key_utf8": (REQUEST, set_key(1, b"\xf4\x90\x80\x80"), "UTF8"),
    "duplicate_key": (REQUEST, set_key(2, b"threads"), "DUPLICATE_KEY"),
    "tag_0": (REQUEST, lambda m, k: setattr(m.backends[0].options[0], "type", 0), "TAG"),
    "string_256": (
        REQUEST,
        lambda m, k: setattr(m.backends[0].options[2], "s", view(b"s" * 256, k)),
        "STRING_LENGTH",
    ),
    "report_action_11": (REPORT, lambda m, k: setattr(m, "action", 11), "ACTION"),
    "report_outcome_4": (REPORT, lambda m, k: setattr(m, "outcome", 4), "OUTCOME"),
    "report_message_nul": (REPORT, lambda m, k: setattr(m, "message", view(b"\0", k)), "NUL"),
    "report_facts_33": (REPORT, lambda m, k: setattr(m, "fact_count", 33), "TOO_MANY_OPTIONS"),
    "report_entries_17": (REPORT, lambda m, k: setattr(m, "entry_count", 17), "TOO_MANY_BACKENDS"),
    "report_entry_name_64": (
        REPORT,
        lambda m, k: setattr(m.entries[0], "name", view(b"n" * 64, k)),
        "ID_LENGTH",
    ),
    "report_entry_flags": (REPORT, lambda m, k: setattr(m.entries[1], "flags", 2), "FLAGS"),
    "report_entry_options_65": (
        REPORT,
        lambda m, k: setattr(m.entries[0], "option_count", 65),
        "TOO_MANY_OPTIONS",
    ),
}


@pytest.mark.parametrize("name", sorted(ENCODER_ERRORS))
def test_encoder_enforces_decoder_limits(name: str, codec: Codec) -> None:
    msg_type, change, error = ENCODER_ERRORS[name]
    data = LOAD_REQUEST if msg_type == REQUEST else HELLO_REPORT
    assert encode_after(codec, data, msg_type, change) == error


def test_encoder_writes_ints_as_sign_extended_i64(codec: Codec) -> None:
    decoded = codec.decode(LOAD_REQUEST)
    assert isinstance(decoded.message, Request)
    decoded.message.backends[0].options[0].i = -2
    status, encoded, _ = codec.encode(decoded.message)
    expected = LOAD_REQUEST.replace(opt_int("threads", 4), opt_int("threads", -2))
    assert (status, encoded[:-4]) == ("OK", expected[:-4])
    assert codec.decode(encoded).status == "OK"


# --- properties ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(value=st.binary(max_size=12).filter(lambda b: b"\0" not in b))
def test_utf8_validation_matches_python(value: bytes, codec: Codec) -> None:
    """Python's strict UTF-8 decoder follows RFC 3629 as the spec requires."""
    try:
        value.decode("utf-8")
        expected = "OK"
    except UnicodeDecodeError:
        expected = "UTF8"
    data = report(facts=[opt_str("k", value)])
    assert codec.decode(data, REPORT).status == expected


option_strategy = st.one_of(
    st.builds(lambda k, v: (k, BOOL, v), st.text(min_size=1, max_size=8), st.booleans()),
    st.builds(
        lambda k, v: (k, INT, v), st.text(min_size=1, max_size=8), st.integers(-(2**31), 2**31 - 1)
    ),
    st.builds(lambda k, v: (k, STRING, v), st.text(min_size=1, max_size=8), st.text(max_size=20)),
).filter(lambda o: "\0" not in o[0] + str(o[2]) and len(o[0].encode()) <= 63)


def encode_option(key: str, tag: int, value: object) -> bytes:
    if tag == BOOL:
        return opt_bool(key, bool(value))
    if tag == INT:
        return opt_int(key, int(value))  # type: ignore[call-overload]
    return opt_str(key, str(value))


@settings(max_examples=150, deadline=None)
@given(
    options=st.lists(option_strategy, max_size=10, unique_by=lambda o: o[0]),
    seq=st.integers(0, 2**32 - 1),
)
def test_random_requests_decode_to_their_values_and_round_trip(
    options: list[tuple[str, int, object]], seq: int, codec: Codec
) -> None:
    data = frame(
        REQUEST,
        request_body(SET, backends=[backend("B", [encode_option(*o) for o in options])]),
        seq,
    )
    decoded = codec.decode(data)
    assert decoded.status == "OK"
    req = decoded.message
    assert isinstance(req, Request)
    got = []
    for i in range(req.backends[0].option_count):
        o = req.backends[0].options[i]
        value = {BOOL: o.b, INT: o.i, STRING: o.s.bytes().decode()}[o.type]
        got.append((o.key.bytes().decode(), o.type, value))
    assert (req.seq, got) == (seq, options)
    assert codec.encode(req)[:2] == ("OK", data)


def python_status(data: bytes, msg_type: int) -> str:
    decode = python_wire.decode_request if msg_type == REQUEST else python_wire.decode_report
    try:
        decode(data)
    except python_wire.WireError as exc:
        return exc.code.name
    return "OK"


def reseal(data: bytes) -> bytes:
    """Set the length field to the size and recompute the CRC, so the body gets parsed."""
    if len(data) < 21:
        return data
    head = data[:8] + struct.pack("<I", len(data)) + data[12:-4]
    return head + struct.pack("<I", zlib.crc32(head))


ALL_CRAFTED = [data for data, _, _ in [*CRAFTED_VALID.values(), *CRAFTED_ERRORS.values()]]
edit_strategy = st.tuples(
    st.sampled_from(["set", "insert", "delete"]), st.integers(0, 4096), st.integers(0, 255)
)


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(ALL_CRAFTED),
    edits=st.lists(edit_strategy, max_size=4),
    sealed=st.booleans(),
)
def test_c_and_python_decoders_return_the_same_error(
    base: bytes, edits: list[tuple[str, int, int]], sealed: bool, codec: Codec
) -> None:
    data = bytearray(base)
    for kind, position, byte in edits:
        at = position % (len(data) + 1)
        if kind == "insert":
            data.insert(at, byte)
        elif data and kind == "set":
            data[at % len(data)] = byte
        elif data:
            del data[at % len(data)]
    message = reseal(bytes(data)) if sealed else bytes(data)
    for msg_type in (REQUEST, REPORT):
        assert codec.decode(message, msg_type).status == python_status(message, msg_type)
