"""ExecuTorch runtime ``Error`` codes (runtime/core/error.h, executorch 1.5.1)."""

from __future__ import annotations

import enum


class RuntimeErrorCode(enum.IntEnum):
    """The runtime's ``executorch::runtime::Error`` values, as reported by devices."""

    Ok = 0x00
    Internal = 0x01
    InvalidState = 0x02
    EndOfMethod = 0x03
    AlreadyLoaded = 0x04
    NotSupported = 0x10
    NotImplemented = 0x11
    InvalidArgument = 0x12
    InvalidType = 0x13
    OperatorMissing = 0x14
    RegistrationExceedingMaxKernels = 0x15
    RegistrationAlreadyRegistered = 0x16
    NotFound = 0x20
    MemoryAllocationFailed = 0x21
    AccessFailed = 0x22
    InvalidProgram = 0x23
    InvalidExternalData = 0x24
    OutOfResources = 0x25
    DelegateInvalidCompatibility = 0x30
    DelegateMemoryAllocationFailed = 0x31
    DelegateInvalidHandle = 0x32


def describe_status(code: int) -> str:
    """``"NotFound (0x20)"`` for a known code, ``"0x7f (unknown)"`` otherwise."""
    try:
        return f"{RuntimeErrorCode(code).name} (0x{code:02x})"
    except ValueError:
        return f"0x{code:02x} (unknown)"
