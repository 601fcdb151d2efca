"""Wire format v2: its constants, error codes, limits, and the header's length and CRC.

The limits (:class:`_Limit` and the request rules by action) are shared by the
decoder and the encoder, so both refuse a message with the same code. Names with a
leading underscore are this package's own: ``decode`` and ``encode`` import them,
nothing outside ``harness.codec.wire`` should.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

from harness.data.messages import (
    ENTRY_FLAG_PROBE,
    LOAD_FLAG_CONCURRENT,
    LOAD_FLAG_KEEP,
    MAX_MODELS,
    UPLOAD_ACTIONS,
    Action,
    LoadPath,
    Outcome,
)
from harness.data.options import (
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_LOAD_BACKENDS,
    MAX_OPTIONS_PER_BACKEND,
    MAX_STRING_BYTES,
)
from harness.errors import UsageError

MAGIC = b"ETBO"
WIRE_VERSION = 2  # every change of an existing message's layout takes the next one
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


class WireError(ValueError, UsageError):
    """Bytes that are not a valid message, or a message that breaks a wire limit.

    ``code`` is the specification's error code; ``offset`` the byte offset in the
    message where the problem was found.
    """

    def __init__(self, code: WireErrorCode, offset: int, problem: str) -> None:
        self.code = code
        self.offset = offset
        self.problem = problem
        super().__init__(f"{code.name} at byte {offset}: {problem}")


class WireVersionError(WireError):
    """A message of a version this codec does not speak (``VERSION``); ``found`` is its
    version byte, so that the caller can say which side to rebuild."""

    def __init__(self, found: int) -> None:
        self.found = found
        super().__init__(
            WireErrorCode.VERSION,
            4,
            f"version {found}; this codec speaks wire-format version {WIRE_VERSION} only",
        )


@dataclass(frozen=True)
class Header:
    """The fields of a message's first 16 bytes that a reader needs after they passed checks."""

    type: MessageType
    length: int
    seq: int


@dataclass(frozen=True)
class _Limit:
    """The allowed range of a length or count (less ``gaps``, values it does not define), and
    the error for a value outside it."""

    code: WireErrorCode
    most: int
    least: int = 0
    gaps: frozenset[int] = frozenset()

    def check(self, size: int, offset: int, what: str, unit: str) -> None:
        if self.least <= size <= self.most:
            if size not in self.gaps:
                return
            raise WireError(self.code, offset, f"{what} {size} is not defined")
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
# Requests with the common body; the upload actions have bodies of their own (program_upload.py).
_ACTIONS = _Limit(
    WireErrorCode.ACTION, max(a for a in Action if a not in UPLOAD_ACTIONS), Action.LOAD
)
_REPORT_ACTIONS = _Limit(
    WireErrorCode.ACTION,
    max(Action),
    Action.NONE,
    frozenset(range(max(Action) + 1)) - frozenset(Action),  # values between the actions
)
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
    Action.REBOOT: _BARE_RULES,
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
