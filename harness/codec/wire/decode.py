"""Wire format v1 (docs/wire-format.md): requests and reports as bytes and as readable JSON.

Decoders check in exactly the order the specification gives, so they refuse a bad
message with the same :class:`WireErrorCode` as the C codec (``agent/codec``).
Encoders of checked requests (the normal case) enforce every limit; requests whose
map was built with :meth:`OptionsMap.unchecked` are encoded as given, as far as the
wire can represent them, so that tests can send out-of-spec messages on purpose.
:func:`seal` fixes length and CRC of a hand-tampered frame.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from harness.messages import (
    ENTRY_FLAG_PROBE,
    LOAD_FLAG_CONCURRENT,
    LOAD_FLAG_KEEP,
    MAX_MODELS,
    Action,
    LoadPath,
    LoadSpec,
    Outcome,
    Report,
    ReportEntry,
    Request,
)
from harness.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_LOAD_BACKENDS,
    MAX_OPTIONS_PER_BACKEND,
    MAX_STRING_BYTES,
    BackendOptions,
    Option,
    OptionsMap,
    OptionType,
    OptionValue,
)

MAGIC = b"ETBO"
WIRE_VERSION = 1
HEADER_SIZE = 16
CRC_SIZE = 4
MIN_MESSAGE = 21
MAX_MESSAGE = 1_048_576
MAX_TEXT_BYTES = 1024  # program path, report message
MAX_BACKENDS = 16  # SET/GET/REGISTER backends; report entries
MAX_DELEGATES = 8
MAX_FACTS = 32

_HEADER = struct.Struct("<4sBBHII")
_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_LENGTH_OFFSET = 8


class MessageType(enum.IntEnum):
    """The header's type byte."""

    REQUEST = 1
    REPORT = 2


_MESSAGE_TYPES = frozenset(MessageType)


class WireErrorCode(enum.IntEnum):
    """The specification's error codes, shared with the C codec."""

    OK = 0
    TRUNCATED = 1
    BAD_MAGIC = 2
    VERSION = 3
    MSG_TYPE = 4
    FLAGS = 5
    LENGTH = 6
    CRC = 7
    TRAILING = 8
    ACTION = 9
    TAG = 10
    BOOL = 11
    INT_RANGE = 12
    KEY_LENGTH = 13
    STRING_LENGTH = 14
    ID_LENGTH = 15
    UTF8 = 16
    NUL = 17
    TOO_MANY_BACKENDS = 18
    TOO_MANY_OPTIONS = 19
    DUPLICATE_KEY = 20
    DUPLICATE_BACKEND = 21
    UNEXPECTED_FIELD = 22
    TOO_MANY_DELEGATES = 23
    TEXT_LENGTH = 24
    OUTCOME = 25
    CAPACITY = 26
    LOAD_PATH = 27
    TOO_MANY_MODELS = 28


class WireError(ValueError):
    """Bytes that are not a valid message, or a message that breaks a wire limit.

    ``code`` is the specification's error code; ``offset`` the byte offset in the
    message where the problem was found.
    """

    def __init__(self, code: WireErrorCode, offset: int, problem: str) -> None:
        self.code = code
        self.offset = offset
        self.problem = problem
        super().__init__(f"{code.name} at byte {offset}: {problem}")


class ReadableFormError(ValueError):
    """A dict that is not a message in the readable form; names the bad field."""


@dataclass(frozen=True)
class Header:
    """The fields of a message's first 16 bytes that a reader needs after they passed checks."""

    type: MessageType
    length: int
    seq: int


@dataclass(frozen=True)
class _Limit:
    """The allowed range of a length or count, and the error for a value outside it."""

    code: WireErrorCode
    most: int
    least: int = 0

    def check(self, size: int, offset: int, what: str, unit: str) -> None:
        if self.least <= size <= self.most:
            return
        if self.most == 0:
            raise WireError(self.code, offset, f"{what} must be empty here; it has {size}{unit}")
        raise WireError(
            self.code, offset, f"{what} is {size}{unit}, limit {self.least}..{self.most}{unit}"
        )


_KEY = _Limit(WireErrorCode.KEY_LENGTH, MAX_KEY_BYTES, 1)
_ID = _Limit(WireErrorCode.ID_LENGTH, MAX_ID_BYTES, 1)
_STRING = _Limit(WireErrorCode.STRING_LENGTH, MAX_STRING_BYTES)
_TEXT = _Limit(WireErrorCode.TEXT_LENGTH, MAX_TEXT_BYTES)
_EMPTY = _Limit(WireErrorCode.UNEXPECTED_FIELD, 0)
_OPTIONS = _Limit(WireErrorCode.TOO_MANY_OPTIONS, MAX_OPTIONS_PER_BACKEND)
_FACTS = _Limit(WireErrorCode.TOO_MANY_OPTIONS, MAX_FACTS)
_ENTRIES = _Limit(WireErrorCode.TOO_MANY_BACKENDS, MAX_BACKENDS)
_ACTIONS = _Limit(WireErrorCode.ACTION, max(Action), Action.LOAD)
_REPORT_ACTIONS = _Limit(WireErrorCode.ACTION, max(Action), Action.NONE)
_OUTCOMES = _Limit(WireErrorCode.OUTCOME, max(Outcome))
_ENTRY_FLAGS = _Limit(WireErrorCode.FLAGS, ENTRY_FLAG_PROBE)  # only bit 0 is defined
_LOAD_FLAGS = _Limit(WireErrorCode.FLAGS, LOAD_FLAG_KEEP | LOAD_FLAG_CONCURRENT)  # bits 0, 1
_MODEL_FLAGS = _Limit(WireErrorCode.FLAGS, 0)  # a further model has no flags
_MODELS = _Limit(WireErrorCode.TOO_MANY_MODELS, MAX_MODELS - 1)  # further models
_ENTRY_MODEL = _Limit(WireErrorCode.TOO_MANY_MODELS, MAX_MODELS - 1)
_LOAD_PATHS = _Limit(WireErrorCode.LOAD_PATH, max(LoadPath))
_METHOD = _Limit(WireErrorCode.ID_LENGTH, MAX_ID_BYTES)  # "" means forward
_METHOD_BACKENDS = {
    path: _Limit(WireErrorCode.TOO_MANY_BACKENDS, MAX_LOAD_BACKENDS)
    if path is LoadPath.MODULE_BOTH
    else _EMPTY
    for path in LoadPath
}
_BYTES = " bytes"


@dataclass(frozen=True)
class _RequestRules:
    """Which request fields an action allows, and how many."""

    program: _Limit
    delegates: _Limit
    backends: _Limit
    options: _Limit


_LOAD_RULES = _RequestRules(
    _TEXT,
    _Limit(WireErrorCode.TOO_MANY_DELEGATES, MAX_DELEGATES),
    _Limit(WireErrorCode.TOO_MANY_BACKENDS, MAX_LOAD_BACKENDS),
    _OPTIONS,
)
_GLOBAL_RULES = _RequestRules(
    _EMPTY, _EMPTY, _Limit(WireErrorCode.TOO_MANY_BACKENDS, MAX_BACKENDS), _OPTIONS
)
_BARE_RULES = _RequestRules(_EMPTY, _EMPTY, _EMPTY, _EMPTY)
_REQUEST_RULES = {
    Action.LOAD: _LOAD_RULES,
    Action.EXECUTE: _BARE_RULES,
    Action.SET: _GLOBAL_RULES,
    Action.GET: _GLOBAL_RULES,
    Action.RESET: _BARE_RULES,
    Action.REGISTER: _RequestRules(_EMPTY, _EMPTY, _GLOBAL_RULES.backends, _EMPTY),
    Action.HELLO: _BARE_RULES,
}


def _check_text_bytes(raw: bytes, offset: int, limit: _Limit, what: str) -> None:
    """Length limit, then NUL, then UTF-8, for a ``str`` whose prefix is at ``offset``."""
    limit.check(len(raw), offset, what, _BYTES)
    nul = raw.find(0)
    if nul >= 0:
        raise WireError(
            WireErrorCode.NUL,
            offset + 2 + nul,
            f"{what} has a NUL byte at index {nul}; the runtime's C strings would end there",
        )
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(
            WireErrorCode.UTF8,
            offset + 2 + exc.start,
            f"{what} is not valid UTF-8 at index {exc.start} ({exc.reason}): "
            f"{raw[exc.start : exc.end]!r}",
        ) from None


# --------------------------------------------------------------------------- header


def _check_header(data: bytes, max_message: int, expect: MessageType | None) -> Header:
    """Decoding steps 1-3."""
    if not MIN_MESSAGE <= max_message <= MAX_MESSAGE:
        raise ValueError(f"max_message must be {MIN_MESSAGE}..{MAX_MESSAGE}; got {max_message}")
    if len(data) < HEADER_SIZE:
        raise WireError(
            WireErrorCode.TRUNCATED,
            len(data),
            f"{len(data)} bytes, fewer than the {HEADER_SIZE}-byte header",
        )
    magic, version, msg_type, flags, length, seq = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise WireError(WireErrorCode.BAD_MAGIC, 0, f"magic is {magic!r}, not {MAGIC!r}")
    if version != WIRE_VERSION:
        raise WireError(
            WireErrorCode.VERSION,
            4,
            f"version {version}; this decoder reads version {WIRE_VERSION} only",
        )
    if msg_type not in _MESSAGE_TYPES:
        raise WireError(
            WireErrorCode.MSG_TYPE, 5, f"type {msg_type} is neither request (1) nor report (2)"
        )
    if expect is not None and msg_type != expect:
        raise WireError(
            WireErrorCode.MSG_TYPE,
            5,
            f"a {MessageType(msg_type).name.lower()} where a {expect.name.lower()} was expected",
        )
    if flags != 0:
        raise WireError(WireErrorCode.FLAGS, 6, f"reserved header flags are 0x{flags:04x}, not 0")
    if not MIN_MESSAGE <= length <= max_message:
        raise WireError(
            WireErrorCode.LENGTH,
            _LENGTH_OFFSET,
            f"length field is {length}, allowed {MIN_MESSAGE}..{max_message}",
        )
    return Header(MessageType(msg_type), length, seq)


def peek_header(
    data: bytes, max_message: int = MAX_MESSAGE, *, expect: MessageType | None = None
) -> Header:
    """Check a message's first 16 bytes (decoding steps 1-3) for a stream reader.

    ``max_message`` is the reader's own limit; ``expect`` optionally the type it
    waits for. Bytes after the first 16 are ignored. Raises :class:`WireError`.
    """
    return _check_header(bytes(data[:HEADER_SIZE]), max_message, expect)


def _open_frame(data: bytes, expect: MessageType) -> tuple[Header, _Reader]:
    """Decoding steps 1-5; returns a reader positioned at the body."""
    data = bytes(data)
    header = _check_header(data, MAX_MESSAGE, expect)
    if len(data) < header.length:
        raise WireError(
            WireErrorCode.TRUNCATED,
            len(data),
            f"buffer has {len(data)} bytes, the length field says {header.length}",
        )
    if len(data) > header.length:
        raise WireError(
            WireErrorCode.TRAILING,
            header.length,
            f"buffer has {len(data)} bytes, {len(data) - header.length} more than the "
            f"length field's {header.length}",
        )
    crc_offset = header.length - CRC_SIZE
    (stored,) = _U32.unpack_from(data, crc_offset)
    computed = zlib.crc32(data[:crc_offset])
    if stored != computed:
        raise WireError(
            WireErrorCode.CRC,
            crc_offset,
            f"CRC field is 0x{stored:08x}, the bytes give 0x{computed:08x}",
        )
    return header, _Reader(data, HEADER_SIZE, crc_offset)


def seal(frame_without_crc: bytes | bytearray) -> bytes:
    """Set the length field of a header+body and append its CRC.

    For negative tests: tamper with an encoded message's bytes (``frame[:-4]``),
    then seal them so that the decoder gets past the length and CRC checks.
    """
    frame = bytearray(frame_without_crc)
    if len(frame) < _LENGTH_OFFSET + 4:
        raise ValueError(f"{len(frame)} bytes cannot hold the header's length field")
    length = len(frame) + CRC_SIZE
    if length > 0xFFFFFFFF:
        raise WireError(
            WireErrorCode.LENGTH, _LENGTH_OFFSET, f"{length} bytes exceed the u32 length"
        )
    _U32.pack_into(frame, _LENGTH_OFFSET, length)
    frame += _U32.pack(zlib.crc32(frame))
    return bytes(frame)


# --------------------------------------------------------------------------- decoding


class _Reader:
    """Reads body fields from ``data[pos:end]``, raising TRUNCATED past ``end``."""

    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data = data
        self.pos = pos
        self.end = end

    def _take(self, size: int, what: str) -> bytes:
        if self.pos + size > self.end:
            raise WireError(
                WireErrorCode.TRUNCATED,
                self.pos,
                f"{what} needs {size} bytes, {self.end - self.pos} are left before the CRC",
            )
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw

    def number(self, fmt: struct.Struct, what: str) -> int:
        return fmt.unpack(self._take(fmt.size, what))[0]

    def bounded(self, fmt: struct.Struct, limit: _Limit, what: str, unit: str = "") -> int:
        offset = self.pos
        value = self.number(fmt, what)
        limit.check(value, offset, what, unit)
        return value

    def text(self, limit: _Limit, what: str) -> str:
        offset = self.pos
        size = self.number(_U16, f"{what} length")
        raw = self._take(size, what)
        _check_text_bytes(raw, offset, limit, what)
        return raw.decode("utf-8")

    def option(self, keys: set[str] | None) -> Option:
        """One option; ``keys`` collects a request backend's keys to refuse duplicates."""
        start = self.pos
        option = self._valid_option(keys)
        if option is not None:
            return option
        self.pos = start
        return self._checked_option(keys)

    def _valid_option(self, keys: set[str] | None) -> Option | None:
        """The hot path: an option that breaks no rule, or None to let
        :meth:`_checked_option` find and describe the first problem."""
        data, pos, end = self.data, self.pos, self.end
        if pos + 2 > end:
            return None
        size = _U16.unpack_from(data, pos)[0]
        pos += 2
        if not 1 <= size <= MAX_KEY_BYTES or pos + size + 1 > end:
            return None
        raw = data[pos : pos + size]
        pos += size
        if 0 in raw:
            return None
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if keys is not None and key in keys:
            return None
        tag = data[pos]
        pos += 1
        value: OptionValue
        if tag == OptionType.BOOL:
            if pos + 1 > end or data[pos] > 1:
                return None
            value = data[pos] == 1
            pos += 1
        elif tag == OptionType.INT:
            if pos + 8 > end:
                return None
            value = _I64.unpack_from(data, pos)[0]
            if not INT32_MIN <= value <= INT32_MAX:
                return None
            pos += 8
        elif tag == OptionType.STRING:
            if pos + 2 > end:
                return None
            size = _U16.unpack_from(data, pos)[0]
            pos += 2
            if size > MAX_STRING_BYTES or pos + size > end:
                return None
            raw = data[pos : pos + size]
            pos += size
            if 0 in raw:
                return None
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
        else:
            return None
        if keys is not None:
            keys.add(key)
        self.pos = pos
        return Option(key, value)

    def _checked_option(self, keys: set[str] | None) -> Option:
        """One option, checked rule by rule in the specification's order."""
        offset = self.pos
        key = self.text(_KEY, "key")
        if keys is not None:
            if key in keys:
                raise WireError(
                    WireErrorCode.DUPLICATE_KEY, offset, f"key {key!r} appears twice in one backend"
                )
            keys.add(key)
        tag_offset = self.pos
        tag = self.number(_U8, f"type tag of {key!r}")
        value_offset = self.pos
        if tag == OptionType.BOOL:
            byte = self.number(_U8, f"bool value of {key!r}")
            if byte > 1:
                raise WireError(
                    WireErrorCode.BOOL, value_offset, f"bool {key!r} is byte {byte}, not 0 or 1"
                )
            return Option(key, byte == 1)
        if tag == OptionType.INT:
            number = self.number(_I64, f"int value of {key!r}")
            if not INT32_MIN <= number <= INT32_MAX:
                raise WireError(
                    WireErrorCode.INT_RANGE,
                    value_offset,
                    f"int {key!r} is {number}, outside int32 ({INT32_MIN}..{INT32_MAX})",
                )
            return Option(key, number)
        if tag == OptionType.STRING:
            return Option(key, self.text(_STRING, f"string value of {key!r}"))
        raise WireError(
            WireErrorCode.TAG, tag_offset, f"type tag {tag} of {key!r} is not 1, 2 or 3"
        )

    def finish(self) -> None:
        if self.pos != self.end:
            raise WireError(
                WireErrorCode.TRAILING,
                self.pos,
                f"{self.end - self.pos} bytes between the last field and the CRC",
            )


def decode_request(data: bytes) -> Request:
    """Decode exactly one whole request; raises :class:`WireError`.

    The request's map is ``OptionsMap.unchecked``: the wire rules hold, and they
    allow SET/GET/REGISTER 16 backends where :class:`OptionsMap` validation allows 8.
    """
    header, reader = _open_frame(data, MessageType.REQUEST)
    action = Action(reader.bounded(_U8, _ACTIONS, "action"))
    rules = _REQUEST_RULES[action]
    program = reader.text(rules.program, f"{action.name} program")
    delegate_count = reader.bounded(_U8, rules.delegates, f"{action.name} delegate count")
    delegates = tuple(reader.text(_ID, "delegate id") for _ in range(delegate_count))
    backends = _read_backends(reader, rules.backends, rules.options, action.name)
    if action is not Action.LOAD:
        reader.finish()
        return Request(action, backends, program, delegates, header.seq)
    path, flags, method, method_backends = _read_load_fields(reader, _LOAD_FLAGS, "LOAD")
    model_count = reader.bounded(_U8, _MODELS, "LOAD further model count")
    models = tuple(_read_model(reader, index + 1) for index in range(model_count))
    reader.finish()
    return Request(
        action, backends, program, delegates, header.seq, path,
        bool(flags & LOAD_FLAG_KEEP), method, method_backends, models,
        bool(flags & LOAD_FLAG_CONCURRENT),
    )


def _read_load_fields(reader: _Reader, flags_limit: _Limit,
                      what: str) -> tuple[LoadPath, int, str, OptionsMap]:
    """path, flags, method and method map of one load specification."""
    path = LoadPath(reader.bounded(_U8, _LOAD_PATHS, f"{what} path"))
    flags = reader.bounded(_U8, flags_limit, f"{what} flags (bits 0 KEEP, 1 CONCURRENT; "
                                             "a further model: none)")
    method = reader.text(_METHOD, f"{what} method name")
    method_backends = _read_backends(
        reader, _METHOD_BACKENDS[path], _OPTIONS, f"{what} {path.label} method map"
    )
    return path, flags, method, method_backends


def _read_model(reader: _Reader, index: int) -> LoadSpec:
    what = f"LOAD model {index}"
    program = reader.text(_LOAD_RULES.program, f"{what} program")
    delegate_count = reader.bounded(_U8, _LOAD_RULES.delegates, f"{what} delegate count")
    delegates = tuple(reader.text(_ID, "delegate id") for _ in range(delegate_count))
    backends = _read_backends(reader, _LOAD_RULES.backends, _OPTIONS, what)
    path, _, method, method_backends = _read_load_fields(reader, _MODEL_FLAGS, what)
    return LoadSpec(program, delegates, backends, path, method, method_backends)


def _read_backends(reader: _Reader, count_limit: _Limit, options_limit: _Limit,
                   what: str) -> OptionsMap:
    """A backend count and that many backends, ids unique within the list."""
    backend_count = reader.bounded(_U8, count_limit, f"{what} backend count")
    backends = []
    ids: set[str] = set()
    for _ in range(backend_count):
        offset = reader.pos
        backend_id = reader.text(_ID, "backend id")
        if backend_id in ids:
            raise WireError(
                WireErrorCode.DUPLICATE_BACKEND, offset, f"backend {backend_id!r} appears twice"
            )
        ids.add(backend_id)
        option_count = reader.bounded(
            _U8, options_limit, f"{what} option count of {backend_id!r}"
        )
        keys: set[str] = set()
        options = tuple(reader.option(keys) for _ in range(option_count))
        backends.append(BackendOptions(backend_id, options))
    return OptionsMap.unchecked(backends)


def decode_report(data: bytes) -> Report:
    """Decode exactly one whole report; raises :class:`WireError`."""
    header, reader = _open_frame(data, MessageType.REPORT)
    action = Action(reader.bounded(_U8, _REPORT_ACTIONS, "action"))
    outcome = Outcome(reader.bounded(_U8, _OUTCOMES, "outcome"))
    detail = reader.number(_U32, "detail")
    message = reader.text(_TEXT, "message")
    fact_count = reader.bounded(_U8, _FACTS, "fact count")
    facts = tuple(reader.option(None) for _ in range(fact_count))
    entry_count = reader.bounded(_U8, _ENTRIES, "entry count")
    entries = []
    for _ in range(entry_count):
        name = reader.text(_ID, "entry name")
        status = reader.number(_U32, f"status of {name!r}")
        calls = reader.number(_U16, f"calls of {name!r}")
        executes = reader.number(_U16, f"executes of {name!r}")
        flags = reader.bounded(
            _U8, _ENTRY_FLAGS, f"flags of {name!r} (only bit 0, PROBE, is defined)"
        )
        model = reader.bounded(_U8, _ENTRY_MODEL, f"model of {name!r}")
        option_count = reader.bounded(_U8, _OPTIONS, f"option count of {name!r}")
        options = tuple(reader.option(None) for _ in range(option_count))
        entries.append(ReportEntry(name, status, calls, executes, flags, options, model))
    reader.finish()
    return Report(action, outcome, detail, message, facts, tuple(entries), header.seq)


# --------------------------------------------------------------------------- encoding


def _unsigned(value: object, fmt: struct.Struct, what: str) -> int:
    """A header or report integer with no limit of its own: it must fit its field."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int; got {type(value).__name__} {value!r}")
    most = (1 << (8 * fmt.size)) - 1
    if not 0 <= value <= most:
        raise ValueError(f"{what} must be 0..{most} to fit its {fmt.size}-byte field; got {value}")
    return int(value)


_BOOL_TRUE = bytes((OptionType.BOOL, 1))
_BOOL_FALSE = bytes((OptionType.BOOL, 0))
_INT_TAG = bytes((OptionType.INT,))
_STRING_TAG = bytes((OptionType.STRING,))


class _Writer:
    """Appends body fields after a header placeholder, so offsets are message offsets.

    ``checked`` enforces every limit; otherwise only what the wire can represent.
    """

    def __init__(self, checked: bool) -> None:
        self.checked = checked
        self.buf = bytearray(HEADER_SIZE)

    def number(self, fmt: struct.Struct, value: object, what: str) -> None:
        self.buf += fmt.pack(_unsigned(value, fmt, what))

    def bounded(self, value: object, limit: _Limit, what: str) -> None:
        """A u8 count or enumeration held to ``limit`` when checked."""
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{what} must be an int; got {type(value).__name__} {value!r}")
        offset = len(self.buf)
        if self.checked:
            limit.check(value, offset, what, "")
        elif not 0 <= value <= 0xFF:
            raise WireError(limit.code, offset, f"{what} is {value}; a u8 holds 0..255")
        self.buf += _U8.pack(value)

    def text(self, text: object, limit: _Limit, what: str) -> None:
        """A ``str``; unchecked, lone surrogates go out as their (invalid) UTF-8 bytes."""
        if type(text) is not str:
            raise TypeError(f"{what} must be a str; got {type(text).__name__} {text!r}")
        raw = text.encode("utf-8", "surrogatepass")
        offset = len(self.buf)
        if self.checked:
            _check_text_bytes(raw, offset, limit, what)
        elif len(raw) > 0xFFFF:
            raise WireError(limit.code, offset, f"{what} is {len(raw)} bytes; a u16 holds 65535")
        self.buf += _U16.pack(len(raw)) + raw

    def option(self, option: Option, keys: set[str] | None) -> None:
        """One option; ``keys`` (checked requests) collects keys to refuse duplicates."""
        if not (self.checked and self._valid_option(option, keys)):
            self._checked_option(option, keys)

    def _valid_option(self, option: Option, keys: set[str] | None) -> bool:
        """The hot path: append an option that breaks no rule and return True, or
        return False (appending nothing) to let :meth:`_checked_option` describe it."""
        key, value = option.key, option.value
        if type(key) is not str or (keys is not None and key in keys):
            return False
        try:
            raw_key = key.encode("utf-8")
        except UnicodeEncodeError:
            return False
        if not 1 <= len(raw_key) <= MAX_KEY_BYTES or 0 in raw_key:
            return False
        kind = type(value)
        if kind is bool:
            tail = _BOOL_TRUE if value else _BOOL_FALSE
        elif kind is int:
            if not INT32_MIN <= value <= INT32_MAX:
                return False
            tail = _INT_TAG + _I64.pack(value)
        elif kind is str:
            try:
                raw = value.encode("utf-8")
            except UnicodeEncodeError:
                return False
            if len(raw) > MAX_STRING_BYTES or 0 in raw:
                return False
            tail = _STRING_TAG + _U16.pack(len(raw)) + raw
        else:
            return False
        if keys is not None:
            keys.add(key)
        self.buf += _U16.pack(len(raw_key)) + raw_key + tail
        return True

    def _checked_option(self, option: Option, keys: set[str] | None) -> None:
        """One option, checked rule by rule; raises for the first rule it breaks."""
        offset = len(self.buf)
        self.text(option.key, _KEY, "key")
        if keys is not None:
            if option.key in keys:
                raise WireError(
                    WireErrorCode.DUPLICATE_KEY,
                    offset,
                    f"key {option.key!r} appears twice in one backend",
                )
            keys.add(option.key)
        self.buf += _U8.pack(option.type)  # TypeError for a value of no option type
        value = option.value
        if isinstance(value, bool):
            self.buf += _U8.pack(1 if value else 0)
        elif isinstance(value, int):
            low, high = (INT32_MIN, INT32_MAX) if self.checked else (-(2**63), 2**63 - 1)
            if not low <= value <= high:
                raise WireError(
                    WireErrorCode.INT_RANGE,
                    len(self.buf),
                    f"int {option.key!r} is {value}, outside {low}..{high}",
                )
            self.buf += _I64.pack(value)
        else:
            self.text(value, _STRING, f"string value of {option.key!r}")

    def finish(self, msg_type: MessageType, seq: object) -> bytes:
        _HEADER.pack_into(
            self.buf, 0, MAGIC, WIRE_VERSION, msg_type, 0, 0, _unsigned(seq, _U32, "seq")
        )
        return seal(self.buf)


def _encode_request(req: Request, checked: bool) -> bytes:
    writer = _Writer(checked)
    writer.bounded(req.action, _ACTIONS, "action")
    # Checked, an unknown action was refused just above; unchecked, its fields are
    # written as given and LOAD's codes only name what the wire cannot represent.
    rules = _REQUEST_RULES.get(req.action, _LOAD_RULES)
    name = getattr(req.action, "name", str(req.action))
    writer.text(req.program, rules.program, f"{name} program")
    writer.bounded(len(req.delegates), rules.delegates, f"{name} delegate count")
    for delegate in req.delegates:
        writer.text(delegate, _ID, "delegate id")
    _write_backends(writer, req.options, rules.backends, rules.options, name)
    if req.action == Action.LOAD:
        flags = (LOAD_FLAG_KEEP if req.keep else 0) | (
            LOAD_FLAG_CONCURRENT if req.concurrent else 0)
        _write_load_fields(writer, req.path, flags, _LOAD_FLAGS, req.method,
                           req.method_options, "LOAD")
        writer.bounded(len(req.models), _MODELS, "LOAD further model count")
        for index, model in enumerate(req.models, 1):
            what = f"LOAD model {index}"
            writer.text(model.program, _LOAD_RULES.program, f"{what} program")
            writer.bounded(len(model.delegates), _LOAD_RULES.delegates, f"{what} delegate count")
            for delegate in model.delegates:
                writer.text(delegate, _ID, "delegate id")
            _write_backends(writer, model.options, _LOAD_RULES.backends, _OPTIONS, what)
            _write_load_fields(writer, model.path, 0, _MODEL_FLAGS, model.method,
                               model.method_options, what)
    return writer.finish(MessageType.REQUEST, req.seq)


def _write_load_fields(writer: _Writer, path: LoadPath, flags: int, flags_limit: _Limit,
                       method: str, method_options: OptionsMap, what: str) -> None:
    writer.bounded(path, _LOAD_PATHS, f"{what} path")
    writer.bounded(flags, flags_limit, f"{what} flags")
    writer.text(method, _METHOD, f"{what} method name")
    limit = _METHOD_BACKENDS.get(path, _METHOD_BACKENDS[LoadPath.MODULE_BOTH])  # type: ignore[call-overload]
    label = path.label if isinstance(path, LoadPath) else str(path)
    _write_backends(writer, method_options, limit, _OPTIONS, f"{what} {label} method map")


def _write_backends(writer: _Writer, options: OptionsMap, count_limit: _Limit,
                    options_limit: _Limit, what: str) -> None:
    backends = options.backends
    writer.bounded(len(backends), count_limit, f"{what} backend count")
    ids: set[str] = set()
    for backend in backends:
        offset = len(writer.buf)
        writer.text(backend.backend_id, _ID, "backend id")
        if writer.checked:
            if backend.backend_id in ids:
                raise WireError(
                    WireErrorCode.DUPLICATE_BACKEND,
                    offset,
                    f"backend {backend.backend_id!r} appears twice; merge its options",
                )
            ids.add(backend.backend_id)
        writer.bounded(
            len(backend.options), options_limit, f"{what} option count of {backend.backend_id!r}"
        )
        keys: set[str] | None = set() if writer.checked else None
        for option in backend.options:
            writer.option(option, keys)


def encode_request(req: Request) -> bytes:
    """The bytes of a request.

    If ``req.options.checked`` every wire limit is enforced (:class:`WireError`);
    an ``OptionsMap.unchecked`` request is encoded as given, as far as the wire can
    represent it (u16 lengths, u8 counts, int64 values), for negative tests.
    """
    maps = (req.options, req.method_options,
            *(m for model in req.models for m in (model.options, model.method_options)))
    return _encode_request(req, all(m.checked for m in maps))


def encode_report(rep: Report, *, checked: bool = True) -> bytes:
    """The bytes of a report. ``checked=False`` writes out-of-spec reports on purpose."""
    writer = _Writer(checked)
    writer.bounded(rep.action, _REPORT_ACTIONS, "action")
    writer.bounded(rep.outcome, _OUTCOMES, "outcome")
    writer.number(_U32, rep.detail, "detail")
    writer.text(rep.message, _TEXT, "message")
    writer.bounded(len(rep.facts), _FACTS, "fact count")
    for fact in rep.facts:
        writer.option(fact, None)
    writer.bounded(len(rep.entries), _ENTRIES, "entry count")
    for entry in rep.entries:
        writer.text(entry.name, _ID, "entry name")
        writer.number(_U32, entry.status, f"status of {entry.name!r}")
        writer.number(_U16, entry.calls, f"calls of {entry.name!r}")
        writer.number(_U16, entry.executes, f"executes of {entry.name!r}")
        writer.bounded(
            entry.flags, _ENTRY_FLAGS, f"flags of {entry.name!r} (only bit 0, PROBE, is defined)"
        )
        writer.bounded(entry.model, _ENTRY_MODEL, f"model of {entry.name!r}")
        writer.bounded(len(entry.options), _OPTIONS, f"option count of {entry.name!r}")
        for option in entry.options:
            writer.option(option, None)
    return writer.finish(MessageType.REPORT, rep.seq)


# --------------------------------------------------------------------------- readable form

_TYPE_NAMES = {OptionType.BOOL: "bool", OptionType.INT: "int", OptionType.STRING: "string"}
_TYPES_BY_NAME = {name: kind for kind, name in _TYPE_NAMES.items()}
_PYTHON_TYPES = {OptionType.BOOL: bool, OptionType.INT: int, OptionType.STRING: str}
_ACTIONS_BY_NAME = {action.name.lower(): action for action in Action}
_OUTCOMES_BY_NAME = {outcome.name.lower(): outcome for outcome in Outcome}


def _readable_option(option: Option) -> dict[str, object]:
    return {"key": option.key, "type": _TYPE_NAMES[option.type], "value": option.value}


def to_readable(msg: Request | Report) -> dict[str, object]:
    """The readable form of a message: a JSON-ready dict with the spec's keys in order."""
    if isinstance(msg, Request):
        readable: dict[str, object] = {
            "type": "request",
            "seq": msg.seq,
            "action": Action(msg.action).name.lower(),
            "program": msg.program,
            "delegates": list(msg.delegates),
            "backends": _readable_backends(msg.options),
        }
        if msg.action == Action.LOAD:
            readable |= {
                "path": LoadPath(msg.path).label,
                "keep": msg.keep,
                "method": msg.method,
                "method_backends": _readable_backends(msg.method_options),
                "concurrent": msg.concurrent,
                "models": [
                    {
                        "program": m.program,
                        "delegates": list(m.delegates),
                        "backends": _readable_backends(m.options),
                        "path": LoadPath(m.path).label,
                        "method": m.method,
                        "method_backends": _readable_backends(m.method_options),
                    }
                    for m in msg.models
                ],
            }
        return readable
    if isinstance(msg, Report):
        return {
            "type": "report",
            "seq": msg.seq,
            "action": Action(msg.action).name.lower(),
            "outcome": Outcome(msg.outcome).name.lower(),
            "detail": int(msg.detail),
            "message": msg.message,
            "facts": [_readable_option(o) for o in msg.facts],
            "entries": [
                {
                    "name": e.name,
                    "status": int(e.status),
                    "calls": e.calls,
                    "executes": e.executes,
                    "flags": e.flags,
                    "model": e.model,
                    "options": [_readable_option(o) for o in e.options],
                }
                for e in msg.entries
            ],
        }
    raise TypeError(f"not a Request or Report: {type(msg).__name__}")


def _readable_backends(options: OptionsMap) -> list[dict[str, object]]:
    return [
        {"id": b.backend_id, "options": [_readable_option(o) for o in b.options]}
        for b in options.backends
    ]


def _fields(data: object, path: str, names: tuple[str, ...]) -> list[object]:
    """The values of exactly the keys ``names`` of a readable-form object."""
    if not isinstance(data, Mapping):
        raise ReadableFormError(f"{path}: expected an object, got {type(data).__name__}")
    missing = [n for n in names if n not in data]
    unknown = [k for k in data if k not in names]
    if missing or unknown:
        raise ReadableFormError(
            f"{path}: missing {missing}, unknown {unknown}; the fields are {list(names)}"
        )
    return [data[n] for n in names]


def _wrong(value: object, expected: str, path: str) -> ReadableFormError:
    return ReadableFormError(f"{path}: expected {expected}, got {type(value).__name__} {value!r}")


def _str(value: object, path: str) -> str:
    if type(value) is not str:
        raise _wrong(value, "a string", path)
    return value


def _int(value: object, path: str) -> int:
    if type(value) is not int:
        raise _wrong(value, "an integer", path)
    return value


def _list(value: object, path: str) -> list[object]:
    if type(value) is not list:
        raise _wrong(value, "a list", path)
    return value


def _option_from_readable(data: object, path: str) -> Option:
    key, type_name, value = _fields(data, path, ("key", "type", "value"))
    if type_name not in _TYPES_BY_NAME:
        raise ReadableFormError(
            f"{path}.type: {type_name!r} is not one of {sorted(_TYPES_BY_NAME)}"
        )
    expected = _PYTHON_TYPES[_TYPES_BY_NAME[type_name]]
    if type(value) is not expected:
        raise _wrong(value, f"a {type_name} as the type says", f"{path}.value")
    return Option(_str(key, f"{path}.key"), value)  # type: ignore[arg-type]


def _options_from_readable(data: object, path: str) -> tuple[Option, ...]:
    return tuple(_option_from_readable(o, f"{path}[{i}]") for i, o in enumerate(_list(data, path)))


def _action(value: object) -> Action:
    if value not in _ACTIONS_BY_NAME:
        raise ReadableFormError(f"action: {value!r} is not one of {list(_ACTIONS_BY_NAME)}")
    return _ACTIONS_BY_NAME[value]  # type: ignore[index]


_REQUEST_FIELDS = ("type", "seq", "action", "program", "delegates", "backends")
_LOAD_FIELDS = ("path", "keep", "method", "method_backends", "concurrent", "models")
_MODEL_FIELDS = ("program", "delegates", "backends", "path", "method", "method_backends")


def _path_from_readable(value: object, path: str) -> LoadPath:
    try:
        return LoadPath.from_label(_str(value, path))
    except ValueError as exc:
        raise ReadableFormError(f"{path}: {exc}") from None


def _model_from_readable(data: object, path: str) -> LoadSpec:
    program, delegates, backends, load_path, method, method_backends = _fields(
        data, path, _MODEL_FIELDS)
    return LoadSpec(
        _str(program, f"{path}.program"),
        tuple(_str(d, f"{path}.delegates[{i}]")
              for i, d in enumerate(_list(delegates, f"{path}.delegates"))),
        _backends_from_readable(backends, f"{path}.backends"),
        _path_from_readable(load_path, f"{path}.path"),
        _str(method, f"{path}.method"),
        _backends_from_readable(method_backends, f"{path}.method_backends"),
    )


def _backends_from_readable(data: object, path: str) -> OptionsMap:
    maps = []
    for i, backend in enumerate(_list(data, path)):
        backend_id, options = _fields(backend, f"{path}[{i}]", ("id", "options"))
        maps.append(
            BackendOptions(
                _str(backend_id, f"{path}[{i}].id"),
                _options_from_readable(options, f"{path}[{i}].options"),
            )
        )
    return OptionsMap.unchecked(maps)


def _request_from_readable(data: Mapping[str, object]) -> Request:
    is_load = "action" in data and _action(data["action"]) is Action.LOAD
    values = _fields(data, "request", _REQUEST_FIELDS + (_LOAD_FIELDS if is_load else ()))
    _, seq, action, program, delegates, backends = values[:6]
    req = Request(
        _action(action),
        _backends_from_readable(backends, "backends"),
        _str(program, "program"),
        tuple(_str(d, f"delegates[{i}]") for i, d in enumerate(_list(delegates, "delegates"))),
        _int(seq, "seq"),
    )
    if is_load:
        path, keep, method, method_backends, concurrent, models = values[6:]
        load_path = _path_from_readable(path, "path")
        for flag, name in ((keep, "keep"), (concurrent, "concurrent")):
            if type(flag) is not bool:
                raise _wrong(flag, "a bool", name)
        req = dataclasses.replace(
            req, path=load_path, keep=keep, method=_str(method, "method"),
            method_options=_backends_from_readable(method_backends, "method_backends"),
            concurrent=concurrent,
            models=tuple(_model_from_readable(m, f"models[{i}]")
                         for i, m in enumerate(_list(models, "models"))),
        )
    _encode_request(req, checked=True)
    return req


def _entry_from_readable(data: object, path: str) -> ReportEntry:
    name, status, calls, executes, flags, model, options = _fields(
        data, path, ("name", "status", "calls", "executes", "flags", "model", "options")
    )
    return ReportEntry(
        _str(name, f"{path}.name"),
        _int(status, f"{path}.status"),
        _int(calls, f"{path}.calls"),
        _int(executes, f"{path}.executes"),
        _int(flags, f"{path}.flags"),
        _options_from_readable(options, f"{path}.options"),
        _int(model, f"{path}.model"),
    )


def _report_from_readable(data: Mapping[str, object]) -> Report:
    _, seq, action, outcome, detail, message, facts, entries = _fields(
        data,
        "report",
        ("type", "seq", "action", "outcome", "detail", "message", "facts", "entries"),
    )
    if outcome not in _OUTCOMES_BY_NAME:
        raise ReadableFormError(f"outcome: {outcome!r} is not one of {list(_OUTCOMES_BY_NAME)}")
    rep = Report(
        _action(action),
        _OUTCOMES_BY_NAME[outcome],  # type: ignore[index]
        _int(detail, "detail"),
        _str(message, "message"),
        _options_from_readable(facts, "facts"),
        tuple(
            _entry_from_readable(e, f"entries[{i}]")
            for i, e in enumerate(_list(entries, "entries"))
        ),
        _int(seq, "seq"),
    )
    encode_report(rep)
    return rep


def from_readable(data: Mapping[str, object]) -> Request | Report:
    """The message of a readable-form dict; the inverse of :func:`to_readable`.

    Raises :class:`ReadableFormError` for a malformed dict and :class:`WireError`
    for a message that breaks a wire limit. Requests carry ``OptionsMap.unchecked``
    maps, as decoded ones do (the wire rules were checked here).
    """
    kind = data.get("type") if isinstance(data, Mapping) else None
    if kind == "request":
        return _request_from_readable(data)
    if kind == "report":
        return _report_from_readable(data)
    raise ReadableFormError(f'type: expected "request" or "report", got {kind!r}')
