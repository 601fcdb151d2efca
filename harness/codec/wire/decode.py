"""Decoding wire messages: the header checks a stream reader needs, then whole requests
and reports, checked in exactly the order the specification gives."""

from __future__ import annotations

import struct
import zlib

from harness.codec.wire.format import (
    _ACTIONS,
    _ENTRIES,
    _ENTRY_FLAGS,
    _ENTRY_MODEL,
    _FACTS,
    _HEADER,
    _I64,
    _ID,
    _KEY,
    _LENGTH_OFFSET,
    _LOAD_FLAGS,
    _LOAD_PATHS,
    _LOAD_RULES,
    _MESSAGE_TYPES,
    _METHOD,
    _METHOD_BACKENDS,
    _MODEL_FLAGS,
    _MODELS,
    _OPTIONS,
    _OUTCOMES,
    _REPORT_ACTIONS,
    _REQUEST_RULES,
    _STRING,
    _TEXT,
    _U8,
    _U16,
    _U32,
    CRC_SIZE,
    HEADER_SIZE,
    MAGIC,
    MAX_MESSAGE,
    MIN_MESSAGE,
    WIRE_VERSION,
    Header,
    MessageType,
    WireError,
    WireErrorCode,
    WireVersionError,
    _check_text_bytes,
    _Limit,
)
from harness.data.messages import (
    LOAD_FLAG_CONCURRENT,
    LOAD_FLAG_KEEP,
    Action,
    LoadPath,
    LoadSpec,
    Outcome,
    Report,
    ReportEntry,
    Request,
)
from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_KEY_BYTES,
    MAX_STRING_BYTES,
    BackendOptions,
    Option,
    OptionsMap,
    OptionType,
    OptionValue,
)


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
        raise WireVersionError(version)
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
    data: bytes | bytearray | memoryview,
    max_message: int = MAX_MESSAGE,
    *,
    expect: MessageType | None = None,
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

    def raw(self, size: int, what: str) -> bytes:
        """``size`` bytes as they are (a program chunk: no text rules)."""
        return self._take(size, what)

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
            number: int = _I64.unpack_from(data, pos)[0]
            if not INT32_MIN <= number <= INT32_MAX:
                return None
            value = number
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
        action,
        backends,
        program,
        delegates,
        header.seq,
        path,
        bool(flags & LOAD_FLAG_KEEP),
        method,
        method_backends,
        models,
        bool(flags & LOAD_FLAG_CONCURRENT),
    )


def _read_load_fields(
    reader: _Reader, flags_limit: _Limit, what: str
) -> tuple[LoadPath, int, str, OptionsMap]:
    """path, flags, method and method map of one load specification."""
    path = LoadPath(reader.bounded(_U8, _LOAD_PATHS, f"{what} path"))
    flags = reader.bounded(
        _U8, flags_limit, f"{what} flags (bits 0 KEEP, 1 CONCURRENT; a further model: none)"
    )
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


def _read_backends(
    reader: _Reader, count_limit: _Limit, options_limit: _Limit, what: str
) -> OptionsMap:
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
        option_count = reader.bounded(_U8, options_limit, f"{what} option count of {backend_id!r}")
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
