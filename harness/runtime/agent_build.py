"""Building the device agent (``agent/runtime``) against the real ExecuTorch SDK.

:func:`ensure_agent` configures and builds ``et-agent`` with CMake for one ABI
and installs it, with the runtime libraries it loads, into one directory that
can be copied to a device as it is (the binary finds the libraries through its
``$ORIGIN`` RUNPATH). Builds are cached under the harness cache, keyed by a hash
of the agent and codec sources, the toolchain file and the SDK version, and
serialised by a file lock so parallel test workers build once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import shipped
from harness.errors import UsageError
from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import CacheEntry
from harness.lifecycle.disk import disk_trouble, said_in, writing
from harness.runtime.install_prefix import SDK_ENV, prefix_from_environment, sdk_from_prefix
from harness.runtime.source_tree import (
    RUNTIME_ENV,
    compiler_cache_env,
    runtime_from_environment,
    source_runtime,
)
from harness.runtime.wheel_sdk import SdkPaths, ensure_sdk

AGENT_BINARY_NAME = "et-agent"

# ABI -> (toolchain file or None for a native build, rough build time in seconds).
_TARGETS: dict[str, tuple[str | None, int]] = {
    "x86_64": (None, 10),
    "aarch64": ("aarch64-linux-gnu.cmake", 15),
}
# Build variants beside the plain one: ETB_SANITIZER values of agent/runtime/CMakeLists.txt.
SANITIZERS = ("thread",)
_MIN_CMAKE = (3, 28)
_BUILD_TIMEOUT_S = 900
_LOG_TAIL_LINES = 40
_BUILD_BYTES = 40 << 20  # a build tree and its install: 19 MB for x86_64


def agent_sources() -> Path:
    """The agent's own sources (``agent/runtime``), as the harness ships them."""
    return shipped.agent_dir() / "runtime"


class AgentBuildError(UsageError):
    """The device agent could not be built."""


class UnsupportedAgentAbi(AgentBuildError):
    """No build recipe exists for the requested ABI on this host."""


class ToolMissing(AgentBuildError):
    """CMake (>= 3.28) or a compiler needed for the build is not installed."""


class AgentBuildFailed(AgentBuildError):
    """A CMake step failed; the message names the build log."""

    def __init__(self, message: str, log: Path) -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class AgentBuild:
    """A built agent: the directory to deploy and what is in it."""

    abi: str
    dist_dir: Path  # et-agent and the runtime libraries, side by side
    binary: Path
    libraries: tuple[Path, ...]  # the shared libraries et-agent loads from dist_dir
    sdk: SdkPaths

    def deploy_files(self) -> tuple[Path, ...]:
        """Every file a device needs, binary first."""
        return (self.binary, *self.libraries)


def ensure_agent(
    abi: str = "x86_64", sdk: SdkPaths | None = None, sanitizer: str | None = None
) -> AgentBuild:
    """The agent built for ``abi`` ("x86_64" or "aarch64"), building it on first use.

    ``sdk`` is the ExecuTorch to build against: by default ``$ET_HARNESS_RUNTIME`` (a
    source tree, :mod:`harness.runtime.source_tree`), ``$ET_HARNESS_SDK`` (an install
    prefix of one's own build, :mod:`harness.runtime.install_prefix`) or else the pinned
    wheel's SDK. ``sanitizer`` (one of :data:`SANITIZERS`) builds that variant: the
    agent's own code instrumented, the runtime libraries as they are.
    """
    if sanitizer is not None and sanitizer not in SANITIZERS:
        raise AgentBuildError(
            f"no agent build variant {sanitizer!r}; known: {', '.join(SANITIZERS)}"
        )
    if abi not in _TARGETS:
        raise UnsupportedAgentAbi(
            f"no agent build for ABI {abi!r} on this host; supported: {', '.join(_TARGETS)}. "
            "For Android see agent/cmake/android-arm64.md"
        )
    toolchain_name, estimate_s = _TARGETS[abi]
    toolchain = shipped.agent_dir() / "cmake" / toolchain_name if toolchain_name else None
    if sdk is None:
        sdk = _sdk_from_environment(abi)
    if sdk.abi != abi:
        raise AgentBuildError(
            f"the ExecuTorch build at {sdk.root} is for {sdk.abi}, but an agent for {abi} is "
            f"needed; point {SDK_ENV} (or the profile's agent.sdk) at a build for {abi}"
        )
    key = _build_key(abi, sdk, toolchain, sanitizer)
    # A source runtime's builds sit in its own directory, beside its tree: see
    # compiler_cache_env for why.
    builds = sdk.source.home / "agent" if sdk.source else cache_root() / "agent"
    variant = f"{abi}-{sanitizer}" if sanitizer else abi
    target = builds / f"{variant}-{key}"
    entry = CacheEntry("agent", target)
    if entry.use():
        build = _describe(abi, target, sdk)
        if build is not None:
            return build
    with entry.building(adopt=lambda: _describe(abi, target, sdk) is not None) as intact:
        if not intact:
            print(
                f"building ExecuTorch device agent for {variant} (first run, ~{estimate_s} s)...",
                file=sys.stderr,
                flush=True,
            )
            with writing(builds, f"building the agent for {variant}", needed=_BUILD_BYTES):
                _build(abi, sdk, toolchain, sanitizer, target, builds / f"{variant}-{key}.log")
            entry.commit()
    build = _describe(abi, target, sdk)
    if build is None:
        raise AgentBuildFailed(
            f"the build of {target} finished without producing {AGENT_BINARY_NAME}",
            builds / f"{variant}-{key}.log",
        )
    return build


def _sdk_from_environment(abi: str) -> SdkPaths:
    named = runtime_from_environment()
    prefix = prefix_from_environment()
    if named is not None and prefix is not None:
        raise AgentBuildError(
            f"both {RUNTIME_ENV} (a source tree) and {SDK_ENV} (an install prefix) are set: "
            "the agent is built against one runtime; unset one"
        )
    if named is not None:
        return source_runtime(named[0], named[1], abi)
    return sdk_from_prefix(prefix) if prefix is not None else ensure_sdk(abi)


def _describe(abi: str, target: Path, sdk: SdkPaths) -> AgentBuild | None:
    dist = target / "dist"
    binary = dist / AGENT_BINARY_NAME
    if not (target / "complete").is_file() or not binary.is_file():
        return None
    libraries = tuple(
        sorted(p for p in dist.iterdir() if p.name.endswith(".so") or ".so." in p.name)
    )
    return AgentBuild(abi=abi, dist_dir=dist, binary=binary, libraries=libraries, sdk=sdk)


_SOURCE_SUFFIXES = {".c", ".h", ".cc", ".cpp", ".hpp", ".cmake", ".ld"}


def _source_files() -> list[tuple[str, Path]]:
    """The files a build reads, with stable names: sources and CMake files, no build trees."""
    files = []
    for root in (agent_sources(), shipped.agent_dir() / "codec"):
        if not root.is_dir():
            raise AgentBuildError(
                f"agent sources not found at {root}; the harness must run from a source "
                "checkout (pip install -e .)"
            )
        for path in root.rglob("*"):
            parts = path.relative_to(root).parts
            if any(p.startswith((".", "build")) or p == "CMakeFiles" for p in parts[:-1]):
                continue
            if path.is_file() and (
                path.suffix in _SOURCE_SUFFIXES or path.name == "CMakeLists.txt"
            ):
                files.append((f"{root.name}/{'/'.join(parts)}", path))
    return sorted(files)


def _build_key(abi: str, sdk: SdkPaths, toolchain: Path | None, sanitizer: str | None) -> str:
    digest = hashlib.sha256()
    digest.update(f"abi={abi}\nexecutorch={sdk.version}\nsanitizer={sanitizer or ''}\n".encode())
    if sdk.source is not None:  # the tree's files, its API and where it came from
        source = sdk.source
        digest.update(f"source={source.label}\n{source.digest}\n{source.api}\n".encode())
    if sdk.own_build:  # rebuilt when the prefix or anything installed in it changes
        digest.update(f"prefix={sdk.root}\n".encode())
        for path in sorted((*sdk.lib.glob("*.so*"), *sdk.cmake_dir.glob("*.cmake"))):
            stat = path.stat()
            digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    inputs = _source_files() + ([(f"cmake/{toolchain.name}", toolchain)] if toolchain else [])
    if sdk.source is not None:
        name = "cmake/executorch-from-source.cmake"
        inputs.append((name, shipped.agent_dir() / name))
    for name, path in inputs:
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def find_cmake() -> Path:
    """A CMake of at least 3.28 (the executorch package's imported targets need it)."""
    candidates: list[Path] = []
    try:
        import cmake  # the PyPI package the project depends on

        candidates.append(Path(cmake.CMAKE_BIN_DIR) / "cmake")
    except ImportError:
        pass
    candidates.append(Path(sys.executable).parent / "cmake")
    found = shutil.which("cmake")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and _cmake_version(candidate) >= _MIN_CMAKE:
            return candidate
    raise ToolMissing(
        "CMake >= 3.28 is needed to build the device agent (the executorch package's "
        "imported targets require it); install it with: "
        f"{sys.executable} -m pip install 'cmake>=3.28'"
    )


def _cmake_version(cmake: Path) -> tuple[int, int]:
    try:
        out = subprocess.run(
            [str(cmake), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except OSError:
        return (0, 0)
    parts = out.split()
    if len(parts) < 3:
        return (0, 0)
    numbers = parts[2].split(".")
    try:
        return (int(numbers[0]), int(numbers[1]))
    except (ValueError, IndexError):
        return (0, 0)


def _build(
    abi: str, sdk: SdkPaths, toolchain: Path | None, sanitizer: str | None, target: Path, log: Path
) -> None:
    cmake = find_cmake()
    if toolchain is not None:
        compiler = "aarch64-linux-gnu-g++"
        if shutil.which(compiler) is None:
            raise ToolMissing(
                f"cross compiler {compiler} not found; install it with: "
                "apt-get install -y g++-aarch64-linux-gnu"
            )
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    build_dir = partial / "build"
    dist_dir = partial / "dist"
    env = _build_env()
    steps = [
        _configure(cmake, sdk, toolchain, sanitizer, build_dir, env),
        [str(cmake), "--build", str(build_dir), "--parallel", "2"],
        [str(cmake), "--install", str(build_dir), "--prefix", str(dist_dir)],
    ]
    _run_steps(steps, env, abi, target, log)
    (partial / "complete").write_text(f"{sdk.version}\n")
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)


def _configure(
    cmake: Path,
    sdk: SdkPaths,
    toolchain: Path | None,
    sanitizer: str | None,
    build_dir: Path,
    env: dict[str, str],
) -> list[str]:
    """CMake's configure step for the agent's build in ``build_dir`` (``env`` gains the
    object cache's settings when there is one)."""
    configure = [
        str(cmake), "-S", str(agent_sources()), "-B", str(build_dir),
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
        f"-DETB_CODEC_DIR={shipped.agent_dir() / 'codec'}",
    ]  # fmt: skip
    if sdk.source is None:
        configure.append(f"-Dexecutorch_DIR={sdk.cmake_dir}")
    else:
        source = sdk.source
        configure += [
            f"-DETB_EXECUTORCH_SOURCE={source.tree}",
            f"-DETB_EXECUTORCH_GENERATED={source.home / 'gen'}",
            f"-DETB_FLATBUFFERS_INCLUDE={source.flatbuffers}",
            f"-DETB_SOURCE_FACTS_DIR={source.home / 'facts'}",
        ]
    # Every build's objects go through the object cache; paths are hashed relative to the
    # harness cache, which holds the wheel's SDK (so a cache of another place, with its own
    # copy of the SDK, finds the same objects), or to a source runtime's home, beside its tree.
    cache_env = compiler_cache_env(cache_root() if sdk.source is None else sdk.source.home)
    if cache_env:
        env.update(cache_env)
        configure += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER=ccache" for lang in ("C", "CXX")]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    if toolchain is not None:
        configure.append(f"-DCMAKE_TOOLCHAIN_FILE={toolchain}")
    if sanitizer is not None:
        configure.append(f"-DETB_SANITIZER={sanitizer}")
    return configure


def _run_steps(
    steps: list[list[str]], env: dict[str, str], abi: str, target: Path, log: Path
) -> None:
    """Run the build's ``steps`` in turn, all output to ``log``; the first that fails (or
    takes too long) is :class:`AgentBuildFailed`, or disk trouble when the log says so."""
    started = time.monotonic()
    with log.open("w") as sink:
        for argv in steps:
            sink.write(f"$ {' '.join(argv)}\n")
            sink.flush()
            try:
                result = subprocess.run(
                    argv, stdout=sink, stderr=subprocess.STDOUT, timeout=_BUILD_TIMEOUT_S,
                    check=False, env=env,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                raise AgentBuildFailed(
                    f"building the agent for {abi} took over {_BUILD_TIMEOUT_S} s; log: {log}", log
                ) from None
            if result.returncode != 0:
                sink.flush()
                disk = said_in(_tail(log))
                if disk is not None:  # the compiler's own words say no more than this
                    raise disk_trouble(target.parent, f"building the agent for {abi}", disk)
                raise AgentBuildFailed(
                    f"building the agent for {abi} failed at `{' '.join(argv[:2])} ...` "
                    f"(exit code {result.returncode}). Full log: {log}\n{_tail(log)}",
                    log,
                )
        sink.write(f"# built in {time.monotonic() - started:.1f} s\n")


def _build_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    return env


def _tail(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    return "\n".join(lines[-_LOG_TAIL_LINES:])
