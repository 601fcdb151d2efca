"""One's own ExecuTorch build as the agent's SDK: an install prefix.

``ET_HARNESS_SDK=PREFIX`` (or a profile's ``agent.sdk``) points the agent build at
an ExecuTorch install prefix as ``cmake --install`` lays it out: ``include/``,
``lib/`` with ``libexecutorch.so`` and the backend libraries, and the CMake package
(``executorch-config.cmake`` and its version file) in ``lib/cmake/ExecuTorch``,
``lib/cmake/executorch`` or ``share/cmake``. A profile may only name a prefix the
user's environment trusts (:func:`check_trusted`). The package must define the namespaced
imported targets the wheel's package defines (``executorch::runtime``,
``executorch::backend_xnnpack``, ...); the agent's CMake says so if it does not.
Without either setting the pinned wheel (:mod:`harness.runtime.wheel_sdk`) is used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.runtime.wheel_sdk import SdkError, SdkPaths, check_sdk_version
from harness.untrusted.trust import listed_by_user
from harness.untrusted.value_rules import (
    ValueRuleError,
    check_path_fits,
    expand_home,
    real_path,
)

SDK_ENV = "ET_HARNESS_SDK"
# Prefixes a profile's agent.sdk may name: the user's word, since building against a
# prefix runs its CMake package here (and, on the host device, its libraries).
TRUSTED_ENV = "ET_HARNESS_TRUSTED_SDKS"

# Where cmake --install puts the package's config, in the order looked at.
_CONFIG_DIRS = (
    "lib/cmake/ExecuTorch",
    "lib/cmake/executorch",
    "lib64/cmake/ExecuTorch",
    "share/cmake",
)
_CONFIG_FILE = "executorch-config.cmake"
_VERSION_FILE = "executorch-config-version.cmake"
# ELF e_machine -> ABI name.
_ELF_MACHINES = {62: "x86_64", 183: "aarch64"}


class SdkPrefixError(SdkError):
    """An ExecuTorch install prefix cannot serve as the agent's SDK."""


def prefix_from_environment() -> Path | None:
    """``$ET_HARNESS_SDK`` as a path, or None when it is unset or empty."""
    value = os.environ.get(SDK_ENV, "")
    if not value:
        return None
    try:
        return expand_home(value, SDK_ENV)
    except ValueRuleError as exc:
        raise SdkPrefixError(str(exc)) from None


def check_trusted(prefix: Path, where: str) -> Path:
    """``prefix`` resolved, if ``$ET_HARNESS_SDK`` or ``$ET_HARNESS_TRUSTED_SDKS`` names it
    (or a directory holding it: :func:`harness.untrusted.trust.listed_by_user`).

    A profile is untrusted input (docs/security.md) and configuring a build against an
    install prefix runs the CMake code of its package on this machine, so a profile
    may only name a prefix the user's own environment already names.
    """
    resolved = real_path(prefix)
    if not (listed_by_user(resolved, SDK_ENV) or listed_by_user(resolved, TRUSTED_ENV)):
        raise SdkPrefixError(
            f"{where}: {resolved} is not a trusted ExecuTorch prefix: building the agent "
            f"against it runs its CMake package on this machine; add it to {TRUSTED_ENV} "
            f"(paths separated by '{os.pathsep}') in your environment to allow it"
        )
    return resolved


def sdk_from_prefix(prefix: Path, where: str = SDK_ENV) -> SdkPaths:
    """The SDK an install prefix provides; ``where`` names the setting for errors."""
    try:
        check_path_fits(str(prefix))
    except ValueRuleError as exc:
        raise SdkPrefixError(f"{where}: {exc}") from None
    prefix = real_path(prefix)
    if not prefix.is_dir():
        raise SdkPrefixError(
            f"{where}: {prefix} is not a directory; point it at the prefix "
            "given to `cmake --install` of your ExecuTorch build"
        )
    runtime = prefix / "lib" / "libexecutorch.so"
    if not runtime.is_file():
        raise SdkPrefixError(
            f"{where}: {prefix} has no lib/libexecutorch.so; build ExecuTorch "
            "with its shared runtime and install it there"
        )
    if not (prefix / "include" / "executorch" / "runtime").is_dir():
        raise SdkPrefixError(f"{where}: {prefix} has no include/executorch/runtime headers")
    config_dir = next(
        (prefix / d for d in _CONFIG_DIRS if (prefix / d / _CONFIG_FILE).is_file()), None
    )
    if config_dir is None:
        raise SdkPrefixError(
            f"{where}: {prefix} has no {_CONFIG_FILE} in any of {', '.join(_CONFIG_DIRS)}; "
            "install ExecuTorch's CMake package with it"
        )
    version = _package_version(config_dir / _VERSION_FILE, where)
    check_sdk_version(version, f"{where}: {config_dir / _VERSION_FILE}")
    return SdkPaths(
        root=prefix,
        abi=_elf_abi(runtime, where),
        version=version,
        config_dir=config_dir,
        own_build=True,
    )


def _package_version(version_file: Path, where: str) -> str:
    try:
        text = version_file.read_text(errors="replace")
    except OSError:
        raise SdkPrefixError(
            f"{where}: {version_file} is missing, so the version of the build "
            "cannot be told; install the package's version file too"
        ) from None
    match = re.search(r'set\(\s*PACKAGE_VERSION\s+"([^"]+)"', text)
    if match is None:
        raise SdkPrefixError(f"{where}: {version_file} sets no PACKAGE_VERSION")
    return match.group(1)


def _elf_abi(library: Path, where: str) -> str:
    with library.open("rb") as handle:
        header = handle.read(20)
    if len(header) < 20 or header[:4] != b"\x7fELF":
        raise SdkPrefixError(f"{where}: {library} is not an ELF shared library")
    machine = int.from_bytes(header[18:20], "little")
    abi = _ELF_MACHINES.get(machine)
    if abi is None:
        raise SdkPrefixError(
            f"{where}: {library} is built for ELF machine {machine}; the agent "
            f"builds for {', '.join(_ELF_MACHINES.values())}"
        )
    return abi
