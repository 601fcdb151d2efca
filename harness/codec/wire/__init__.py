"""Wire format v2 (docs/wire-format.md): requests and reports as bytes.

Decoders check in exactly the order the specification gives, so they refuse a bad
message with the same :class:`WireErrorCode` as the C codec (``agent/codec``).
Encoders of checked requests (the normal case) enforce every limit; requests whose
map was built with :meth:`OptionsMap.unchecked` are encoded as given, as far as the
wire can represent them, so that tests can send out-of-spec messages on purpose.
:func:`seal` fixes length and CRC of a hand-tampered frame.

``format`` holds the constants, error codes and limits; ``decode`` and ``encode`` the
two directions.
"""

from harness.codec.wire.decode import (
    decode_report,
    decode_request,
    peek_header,
)
from harness.codec.wire.encode import (
    check_request,
    encode_report,
    encode_request,
)
from harness.codec.wire.format import (
    CRC_SIZE,
    HEADER_SIZE,
    MAGIC,
    MAX_BACKENDS,
    MAX_DELEGATES,
    MAX_FACTS,
    MAX_MESSAGE,
    MAX_TEXT_BYTES,
    MIN_MESSAGE,
    WIRE_VERSION,
    Header,
    MessageType,
    WireError,
    WireErrorCode,
    WireVersionError,
    seal,
)

__all__ = [
    "CRC_SIZE",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_BACKENDS",
    "MAX_DELEGATES",
    "MAX_FACTS",
    "MAX_MESSAGE",
    "MAX_TEXT_BYTES",
    "MIN_MESSAGE",
    "WIRE_VERSION",
    "Header",
    "MessageType",
    "WireError",
    "WireErrorCode",
    "WireVersionError",
    "check_request",
    "decode_report",
    "decode_request",
    "encode_report",
    "encode_request",
    "peek_header",
    "seal",
]
