"""Encoding wire messages: checked (every limit enforced) or, for negative tests, as
given as far as the wire can represent them."""

from __future__ import annotations

import struct

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
    _LOAD_FLAGS,
    _LOAD_PATHS,
    _LOAD_RULES,
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
    HEADER_SIZE,
    MAGIC,
    WIRE_VERSION,
    MessageType,
    WireError,
    WireErrorCode,
    _check_text_bytes,
    _Limit,
    seal,
)
from harness.data.messages import (
    LOAD_FLAG_CONCURRENT,
    LOAD_FLAG_KEEP,
    Action,
    LoadPath,
    Report,
    Request,
)
from harness.data.options import (
    INT32_MAX,
    INT32_MIN,
    MAX_KEY_BYTES,
    MAX_STRING_BYTES,
    Option,
    OptionsMap,
    OptionType,
)


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
        if type(value) is bool:
            tail = _BOOL_TRUE if value else _BOOL_FALSE
        elif type(value) is int:
            if not INT32_MIN <= value <= INT32_MAX:
                return False
            tail = _INT_TAG + _I64.pack(value)
        elif type(value) is str:
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
            LOAD_FLAG_CONCURRENT if req.concurrent else 0
        )
        _write_load_fields(
            writer, req.path, flags, _LOAD_FLAGS, req.method, req.method_options, "LOAD"
        )
        writer.bounded(len(req.models), _MODELS, "LOAD further model count")
        for index, model in enumerate(req.models, 1):
            what = f"LOAD model {index}"
            writer.text(model.program, _LOAD_RULES.program, f"{what} program")
            writer.bounded(len(model.delegates), _LOAD_RULES.delegates, f"{what} delegate count")
            for delegate in model.delegates:
                writer.text(delegate, _ID, "delegate id")
            _write_backends(writer, model.options, _LOAD_RULES.backends, _OPTIONS, what)
            _write_load_fields(
                writer, model.path, 0, _MODEL_FLAGS, model.method, model.method_options, what
            )
    return writer.finish(MessageType.REQUEST, req.seq)


def _write_load_fields(
    writer: _Writer,
    path: LoadPath,
    flags: int,
    flags_limit: _Limit,
    method: str,
    method_options: OptionsMap,
    what: str,
) -> None:
    writer.bounded(path, _LOAD_PATHS, f"{what} path")
    writer.bounded(flags, flags_limit, f"{what} flags")
    writer.text(method, _METHOD, f"{what} method name")
    limit = _METHOD_BACKENDS.get(path, _METHOD_BACKENDS[LoadPath.MODULE_BOTH])
    label = path.label if isinstance(path, LoadPath) else str(path)
    _write_backends(writer, method_options, limit, _OPTIONS, f"{what} {label} method map")


def _write_backends(
    writer: _Writer, options: OptionsMap, count_limit: _Limit, options_limit: _Limit, what: str
) -> None:
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
    maps = (
        req.options,
        req.method_options,
        *(m for model in req.models for m in (model.options, model.method_options)),
    )
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


def check_request(req: Request) -> None:
    """Raise :class:`WireError` for the first wire limit ``req`` breaks, enforcing every
    limit even where its maps are ``OptionsMap.unchecked``."""
    _encode_request(req, checked=True)
