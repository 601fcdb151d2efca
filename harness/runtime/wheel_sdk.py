"""The ExecuTorch C++ SDK, taken from the ``executorch`` wheel on PyPI.

The device agent is built against the real runtime: the headers, shared
libraries and CMake package inside the ``executorch`` wheel, plus the program
schema and the ``flatc`` binary it ships. :func:`ensure_sdk` downloads the wheel
for one ABI with ``pip download --no-deps --require-hashes`` (so none of its
heavy Python dependencies is installed), extracts only those parts into the
harness cache and returns where they are. The versions and their wheels' hashes are
pinned in ``agent/executorch-sdk.lock`` (:func:`locked_versions`; the first,
:func:`default_version`, is the default); each version has a cache directory of its
own.

A fetch works in a staging directory beside its target and renames it into place, so an
interrupted one leaves only that staging directory (e.g. a truncated wheel) behind, never
a tree taken for complete; :func:`repair_sdk_cache` (``python -m harness.runtime.wheel_sdk
--repair``, which ``ci/setup.sh`` runs) removes such leftovers.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import filelock

from harness import shipped
from harness.errors import UsageError
from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import CacheEntry
from harness.lifecycle.disk import disk_trouble, said_in, writing
from harness.runtime.source_description import SourceRuntime

# ABI name -> the manylinux platform tag of its wheel.
WHEEL_PLATFORMS = {
    "x86_64": "manylinux_2_28_x86_64",
    "aarch64": "manylinux_2_28_aarch64",
}
WHEEL_PYTHON_VERSION = "3.11"

# Parts of the wheel's ``executorch/`` package the SDK keeps, relative to it.
_KEPT_PREFIXES = ("include/", "lib/", "share/cmake/", "schema/")
_KEPT_FILES = ("data/bin/flatc", "backends/xnnpack/serialization/schema.fbs")
# Bumped when the kept parts change, so that an older extraction is not taken
# for a complete one (and is left alone for whoever still uses it).
_LAYOUT_REVISION = 2

_PIP_TIMEOUT_S = 600
# What a fetch writes beside its target at most: the wheel (19 MB for 1.5.1 x86_64) as
# pip unpacks it and as it keeps it, and the parts kept of it (22 MB), with some room.
_FETCH_BYTES = 64 << 20
_FETCH_STEP = "fetching the ExecuTorch SDK"


class SdkError(UsageError):
    """The ExecuTorch SDK could not be provided."""


class UnsupportedAbi(SdkError):
    """No executorch wheel is pinned for the requested ABI."""


class SdkDownloadFailed(SdkError):
    """``pip download`` of the executorch wheel failed."""


class SdkExtractFailed(SdkError):
    """The downloaded wheel lacks the parts the SDK needs, or cannot be unpacked."""


class VersionNotLocked(SdkError):
    """No wheel of the requested executorch version is pinned in the lock file."""


class SdkTooOld(SdkError):
    """The requested executorch version has no C++ SDK (only 1.5.0 and later do)."""


# The first release whose wheel carries the C++ SDK (headers, libexecutorch.so,
# CMake package): 1.3.1-1.4.1 keep the runtime inside the Python extension only.
MIN_SDK_VERSION = (1, 5, 0)


def check_sdk_version(version: str, where: str) -> None:
    """Raise :class:`SdkTooOld` naming ``where`` unless ``version`` is 1.5.0 or later."""
    numbers = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if numbers is None:
        raise SdkError(f"{where}: cannot read an executorch version from {version!r}")
    found = tuple(int(n or 0) for n in numbers.groups())
    if found < MIN_SDK_VERSION:
        minimum = ".".join(map(str, MIN_SDK_VERSION))
        raise SdkTooOld(
            f"{where}: executorch {version} has no C++ SDK; the agent needs {minimum} or later "
            f"(earlier wheels ship no libexecutorch.so or CMake package, only the Python "
            f"extension). Pin executorch>={minimum} or point ET_HARNESS_SDK at your own build"
        )


def lock_file() -> Path:
    """The SDK lock the harness ships (``agent/executorch-sdk.lock``)."""
    return shipped.agent_dir() / "executorch-sdk.lock"


@functools.cache
def _locked() -> dict[str, str]:
    """Each pinned version and its requirement block (the line and its hashes), in order."""
    path = lock_file()
    blocks = re.findall(
        r"^executorch==([0-9][^\s\\]*)((?:[ \t]*\\\n[ \t]*--hash=sha256:[0-9a-f]{64})+)",
        path.read_text(),
        re.MULTILINE,
    )
    if not blocks:
        raise SdkError(f"{path} has no 'executorch==VERSION --hash=...' block")
    return {version: f"executorch=={version}{hashes}\n" for version, hashes in blocks}


def locked_versions() -> tuple[str, ...]:
    """The pinned versions, in the lock file's order."""
    return tuple(_locked())


def default_version() -> str:
    """The version a run without ``--runtime`` uses: the lock's first."""
    return locked_versions()[0]


def check_locked(version: str, where: str) -> None:
    """Raise :class:`VersionNotLocked` naming ``where`` unless a wheel of ``version`` is
    pinned."""
    if version not in _locked():
        raise VersionNotLocked(
            f"{where}: no executorch {version} wheel is pinned in {lock_file().name} (pinned: "
            f"{', '.join(locked_versions())}); give a pinned version, or an install prefix or "
            "source tree of your own"
        )


@dataclass(frozen=True)
class SdkPaths:
    """Where one ABI's ExecuTorch SDK lives: the pinned wheel's, or an install prefix.

    For the wheel, ``root`` is its trimmed ``executorch/`` package in the cache. For
    one's own build (:mod:`harness.runtime.install_prefix`), ``root`` is the install prefix,
    ``config_dir`` the directory of its ``executorch-config.cmake`` and
    ``own_build`` is True; such a prefix has no program schema or ``flatc``, which
    always come from the pinned wheel. For a source tree
    (:func:`harness.runtime.source_tree.source_runtime`), ``source`` describes it and
    ``root`` is the wheel's (its ``flatc`` and schema); the runtime is compiled from the tree.
    """

    root: Path
    abi: str
    version: str
    config_dir: Path | None = None
    own_build: bool = False
    source: SourceRuntime | None = None

    @property
    def include(self) -> Path:
        return self.root / "include"

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def cmake_dir(self) -> Path:
        """Directory holding ``executorch-config.cmake`` (pass as ``executorch_DIR``)."""
        return self.config_dir or self.root / "share" / "cmake"

    @property
    def schema(self) -> Path:
        """Directory holding ``program.fbs`` and ``scalar_type.fbs``."""
        return self.root / "schema"

    @property
    def xnnpack_schema(self) -> Path:
        """XNNPACK's delegate blob schema (``backends/xnnpack/serialization/schema.fbs``)."""
        return self.root / _KEPT_FILES[1]

    @property
    def flatc(self) -> Path:
        """The wheel's ``flatc``; it runs only on a host of this SDK's ABI."""
        return self.root / "data" / "bin" / "flatc"


def host_abi() -> str:
    """The ABI of this machine, in :data:`WHEEL_PLATFORMS` spelling."""
    machine = os.uname().machine
    return {"arm64": "aarch64"}.get(machine, machine)


def sdk_dir(abi: str, version: str | None = None) -> Path:
    """Where :func:`ensure_sdk` puts the SDK of ``version`` for ``abi``."""
    version = version or default_version()
    return cache_root() / "sdk" / f"executorch-{version}-{abi}-r{_LAYOUT_REVISION}"


def ensure_sdk(abi: str, version: str | None = None) -> SdkPaths:
    """The ExecuTorch SDK of ``version`` (one of :func:`locked_versions`; None: the
    default) for ``abi`` ("x86_64" or "aarch64"), fetched on first use.

    Safe to call from parallel processes: one downloads and extracts under a
    file lock, the others wait and reuse the result.
    """
    version = version or default_version()
    check_locked(version, str(lock_file()))
    check_sdk_version(version, str(lock_file()))
    if abi not in WHEEL_PLATFORMS:
        raise UnsupportedAbi(
            f"no executorch wheel for ABI {abi!r}; supported: {', '.join(sorted(WHEEL_PLATFORMS))}"
        )
    target = sdk_dir(abi, version)
    paths = SdkPaths(root=target, abi=abi, version=version)
    entry = CacheEntry("sdk", target)
    if entry.use():
        return paths
    with entry.building(adopt=lambda: _is_complete(paths)) as intact:
        if intact:
            return paths
        with (
            writing(target.parent, _FETCH_STEP, needed=_FETCH_BYTES),
            tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp,
        ):
            wheel = _download_wheel(abi, version, Path(tmp))
            staging = Path(tmp) / "sdk"
            _extract_sdk(wheel, staging)
            if target.exists():  # a partial tree from an interrupted run: moved aside
                target.rename(Path(tmp) / "replaced")  # and removed with the staging dir
            staging.rename(target)
        entry.commit()
    return paths


def repair_sdk_cache() -> list[Path]:
    """Remove what interrupted fetches left in the SDK cache and return it: staging
    directories (a truncated wheel, a half-extracted tree) and incomplete SDK trees.

    Each target is repaired under its fetch lock, so a fetch in progress in another
    process (which holds it) is left alone.
    """
    root = cache_root() / "sdk"
    leftovers: dict[str, list[Path]] = {}
    for entry in sorted(root.iterdir()) if root.is_dir() else ():
        if not entry.is_dir():
            continue
        if entry.name.startswith("."):  # ".{target}.{random}": a fetch's staging directory
            leftovers.setdefault(entry.name[1:].rpartition(".")[0], []).append(entry)
        elif entry.name.endswith(f"-r{_LAYOUT_REVISION}") and not _is_complete(
            SdkPaths(root=entry, abi="", version="")
        ):  # an older layout's tree is left to the checkout that uses it
            leftovers.setdefault(entry.name, []).append(entry)
    removed: list[Path] = []
    for target, entries in leftovers.items():
        try:
            with filelock.FileLock(str(root / f"{target}.lock"), timeout=0):
                for entry in entries:
                    if entry.name.startswith(".") or not _is_complete(
                        SdkPaths(root=entry, abi="", version="")
                    ):
                        shutil.rmtree(entry, ignore_errors=True)
                        removed.append(entry)
        except filelock.Timeout:
            continue  # being fetched right now
    return removed


def _is_complete(paths: SdkPaths) -> bool:
    return (
        (paths.lib / "libexecutorch.so").is_file()
        and (paths.cmake_dir / "executorch-config.cmake").is_file()
        and (paths.schema / "program.fbs").is_file()
        and paths.flatc.is_file()
        and paths.xnnpack_schema.is_file()
    )


def _download_wheel(abi: str, version: str, tmp: Path) -> Path:
    platform = WHEEL_PLATFORMS[abi]
    dest = tmp / "wheel"
    requirement = tmp / "requirement.txt"  # the version's block of the lock file alone
    requirement.write_text(_locked()[version])
    argv = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--only-binary=:all:",
        "--platform", platform,
        "--python-version", WHEEL_PYTHON_VERSION,
        "--require-hashes", "-r", str(requirement),
        "--dest", str(dest),
        "--disable-pip-version-check", "--quiet",
    ]  # fmt: skip
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=_PIP_TIMEOUT_S, check=False,
            env={**os.environ, "TMPDIR": str(dest.parent)},  # its unpacking too: one disk
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise SdkDownloadFailed(
            f"pip download of executorch=={version} for {platform} took over "
            f"{_PIP_TIMEOUT_S} s; check access to PyPI and retry"
        ) from None
    wheels = sorted(dest.glob("executorch-*.whl")) if dest.is_dir() else []
    if result.returncode != 0 or len(wheels) != 1:
        output = (result.stderr.strip() or result.stdout.strip())[-2000:]
        disk = said_in(output)
        if disk is not None:  # pip's traceback says no more than this line
            raise disk_trouble(dest.parent.parent, _FETCH_STEP, disk, _FETCH_BYTES)
        raise SdkDownloadFailed(
            f"could not download the executorch {version} wheel for {platform} "
            f"(pip exit code {result.returncode}). Check that PyPI is reachable, or run by hand:\n"
            f"  {' '.join(argv)}\n"
            f"A hash mismatch means {lock_file()} and the wheel on PyPI disagree.\n"
            f"pip said:\n{output}"
        )
    return wheels[0]


def _extract_sdk(wheel: Path, staging: Path) -> None:
    prefix = "executorch/"
    kept = 0
    try:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                if info.is_dir() or not info.filename.startswith(prefix):
                    continue
                relative = info.filename[len(prefix) :]
                if not (relative.startswith(_KEPT_PREFIXES) or relative in _KEPT_FILES):
                    continue
                if ".." in Path(relative).parts:
                    raise SdkExtractFailed(f"{wheel.name}: unsafe member path {info.filename!r}")
                destination = staging / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, destination.open("wb") as sink:
                    shutil.copyfileobj(source, sink)
                mode = (info.external_attr >> 16) & 0o777
                destination.chmod(mode or 0o644)
                kept += 1
    except zipfile.BadZipFile as exc:
        raise SdkExtractFailed(f"{wheel} is not a valid wheel: {exc}") from None
    flatc = staging / _KEPT_FILES[0]
    if flatc.exists():
        flatc.chmod(0o755)
    missing = [
        name
        for name in ("lib/libexecutorch.so", "share/cmake/executorch-config.cmake",
                     "schema/program.fbs", *_KEPT_FILES)
        if not (staging / name).is_file()
    ]  # fmt: skip
    if missing:
        raise SdkExtractFailed(
            f"{wheel.name} lacks {', '.join(missing)} ({kept} files kept); "
            "the pinned executorch version may not ship its C++ SDK"
        )


def main(argv: list[str]) -> int:
    """``python -m harness.runtime.wheel_sdk --repair``: remove leftovers of interrupted fetches."""
    if argv != ["--repair"]:
        print("usage: python -m harness.runtime.wheel_sdk --repair", file=sys.stderr)
        return 2
    for path in repair_sdk_cache():
        print(f"removed {path}: left by an interrupted SDK fetch")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
