"""ADB host keys: parsing ``adbkey.pub`` lines and checking AUTH signatures.

An ADB public key line is ``BASE64 comment`` where BASE64 encodes Android's
``RSAPublicKey`` struct: ``u32`` word count, ``u32`` n0inv, the modulus as
little-endian ``u32`` words, R^2 mod n (same size), ``u32`` exponent. The host signs
the device's 20-byte token with PKCS#1 v1.5 as if the token were a SHA-1 digest.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

from harness.errors import UsageError

TOKEN_SIZE = 20


class AdbKeyError(ValueError, UsageError):
    """A line is not an ADB public key."""


@dataclass(frozen=True)
class AdbPublicKey:
    """An RSA public key in the form ``adb`` stores and sends it."""

    modulus: int
    exponent: int
    comment: str

    @classmethod
    def parse(cls, line: str) -> AdbPublicKey:
        """Parse ``BASE64 [comment]`` as in ``adbkey.pub`` or a device's ``adb_keys``."""
        encoded, _, comment = line.strip().partition(" ")
        try:
            blob = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise AdbKeyError(f"not base64: {exc}") from None
        if len(blob) < 8:
            raise AdbKeyError(f"{len(blob)} bytes is too short for an ADB RSA key")
        words = struct.unpack_from("<I", blob, 0)[0]
        expected = 8 + 8 * words + 4
        if words == 0 or len(blob) != expected:
            raise AdbKeyError(
                f"an ADB RSA key of {words} words is {expected} bytes; got {len(blob)}"
            )
        modulus = int.from_bytes(blob[8 : 8 + 4 * words], "little")
        exponent = struct.unpack_from("<I", blob, 8 + 8 * words)[0]
        return cls(modulus, exponent, comment.strip("\0 \n"))

    def verifies(self, token: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's signature of ``token``."""
        key = rsa.RSAPublicNumbers(self.exponent, self.modulus).public_key()
        try:
            key.verify(signature, token, padding.PKCS1v15(), utils.Prehashed(hashes.SHA1()))
        except (InvalidSignature, ValueError):
            return False
        return True


def load_adb_keys(path: Path) -> tuple[AdbPublicKey, ...]:
    """The keys in an ``adb_keys`` file (one ``adbkey.pub`` line each; blank lines skipped)."""
    keys = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            keys.append(AdbPublicKey.parse(line))
        except AdbKeyError as exc:
            raise AdbKeyError(f"{path}:{number}: {exc}") from None
    return tuple(keys)
