"""The glibc bundle: the aarch64 agent with the glibc loader and every library it loads.

A phone has no glibc, and the agent is built against the glibc (manylinux) aarch64
wheel. Started through its own loader (``LOADER --library-path DIR DIR/et-agent``) a
glibc program needs nothing from the device but the kernel: neither Android's linker,
its namespaces nor its library paths take part. :func:`ensure_glibc_bundle` makes that
directory from an agent build: the agent and the libraries the build ships beside it,
every shared library in their ``DT_NEEDED`` closure (the ExecuTorch libraries, any backend
library the build links, glibc's from the Debian cross sysroot) and the loader the agent's
``PT_INTERP`` names, all stripped. The closure is read from the ELF files, never listed
by hand, so a build that links more libraries ships more. Bundles are cached under the
harness cache by content.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import CacheEntry
from harness.lifecycle.disk import writing
from harness.runtime.agent_build import AGENT_BINARY_NAME, AgentBuild

GLIBC_SYSROOT = Path("/usr/aarch64-linux-gnu")  # Debian's libc6-arm64-cross and friends
LOADER_NAME = "ld-linux-aarch64.so.1"
BUNDLE_ABI = "aarch64"
_READELF = "aarch64-linux-gnu-readelf"
_STRIP = "aarch64-linux-gnu-strip"
_TOOL_TIMEOUT_S = 60
_EM_AARCH64 = 183
_MAX_LIBRARIES = 256  # a closure larger than this is a broken search path, not a program

_NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]")
_RUNPATH = re.compile(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]")
_INTERP = re.compile(r"\[Requesting program interpreter: ([^\]]+)\]")
_LOAD = re.compile(r"^\s*LOAD\s.*\s(0x[0-9a-f]+)\s*$", re.MULTILINE)


class GlibcBundleError(UsageError):
    """The bundle cannot be made; the message says which file or tool is missing."""


@dataclass(frozen=True)
class ElfLinks:
    """What the dynamic loader reads from one ELF file."""

    needed: tuple[str, ...]  # DT_NEEDED, in order
    runpath: tuple[str, ...]  # DT_RUNPATH or DT_RPATH entries, $ORIGIN unexpanded
    interpreter: str | None  # PT_INTERP (executables only)
    load_alignment: int  # the smallest p_align of its PT_LOAD segments


@dataclass(frozen=True)
class GlibcBundle:
    """A bundle directory in the cache: copy it to a device as it is."""

    directory: Path
    files: tuple[Path, ...]  # the agent first, then the libraries and the loader
    unstripped_bytes: int
    load_alignment: int  # the smallest PT_LOAD alignment of any file (page sizes it suits)

    @property
    def agent(self) -> Path:
        return self.files[0]

    @property
    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def start_argv(agent_path: str) -> list[str]:
    """Argv that runs the bundled agent at device path ``agent_path`` through its loader."""
    directory = posixpath.dirname(agent_path)
    return [posixpath.join(directory, LOADER_NAME), "--library-path", directory, agent_path]


def read_links(path: Path) -> ElfLinks:
    """DT_NEEDED, RUNPATH, PT_INTERP and segment alignment of ``path`` (via binutils readelf)."""
    output = _tool([_READELF, "--wide", "--dynamic", "--program-headers", str(path)])
    runpath = _RUNPATH.search(output)
    interpreter = _INTERP.search(output)
    alignments = [int(a, 16) for a in _LOAD.findall(output)]
    return ElfLinks(
        needed=tuple(_NEEDED.findall(output)),
        runpath=tuple(p for p in runpath.group(1).split(":") if p) if runpath else (),
        interpreter=interpreter.group(1) if interpreter else None,
        load_alignment=min(alignments) if alignments else 0,
    )


def library_closure(binary: Path, search: Sequence[Path]) -> dict[str, Path]:
    """Every library ``binary`` loads, by the name it is loaded as: DT_NEEDED, transitively,
    and the PT_INTERP loader.

    Each name is looked for in ``search`` (in order), then in the RUNPATH of the file
    that needs it, and must be an aarch64 ELF file; :class:`GlibcBundleError` names the
    first one not found.
    """
    closure = _closure(binary, search)
    return {name: path for name, (path, _) in closure.items() if name != AGENT_BINARY_NAME}


def ensure_glibc_bundle(build: AgentBuild, sysroot: Path = GLIBC_SYSROOT) -> GlibcBundle:
    """The glibc bundle of an aarch64 agent build, made (and cached) on first use."""
    if build.abi != BUNDLE_ABI:
        raise GlibcBundleError(
            f"the glibc bundle carries aarch64 glibc; the {build.abi} agent runs as it is"
        )
    if not (sysroot / "lib" / LOADER_NAME).is_file():
        raise GlibcBundleError(
            f"no {LOADER_NAME} in {sysroot}/lib: install the cross sysroot with "
            "apt-get install -y g++-aarch64-linux-gnu"
        )
    # The build's own libraries all go in, needed or not: a plugin it ships may be dlopen'ed.
    closure = _closure(build.binary, (build.dist_dir, sysroot / "lib"), build.libraries)
    inputs = {name: path for name, (path, _) in closure.items()}
    key = hashlib.sha256()
    for name in sorted(inputs):
        key.update(f"{name}\0{_sha256(inputs[name])}\n".encode())
    target = cache_root() / "bundle" / f"{BUNDLE_ABI}-{key.hexdigest()[:16]}"
    entry = CacheEntry("bundle", target)
    if not entry.use():
        with entry.building(adopt=(target / "complete").is_file) as intact:
            if not intact:
                with writing(target.parent, "making the glibc bundle"):
                    _make(target, inputs)
                entry.commit()
    libraries = sorted(name for name in inputs if name != AGENT_BINARY_NAME)
    return GlibcBundle(
        directory=target,
        files=(target / AGENT_BINARY_NAME, *(target / name for name in libraries)),
        unstripped_bytes=sum(p.stat().st_size for p in inputs.values()),
        # stripping leaves program headers as they are
        load_alignment=min(links.load_alignment for _, links in closure.values()),
    )


def _closure(
    binary: Path, search: Sequence[Path], shipped: Sequence[Path] = ()
) -> dict[str, tuple[Path, ElfLinks]]:
    """The agent (as ``et-agent``), the ``shipped`` libraries and every library they load,
    each with its links."""
    links = read_links(binary)
    if links.interpreter is None:
        raise GlibcBundleError(f"{binary} names no program interpreter: not a dynamic executable")
    found = {AGENT_BINARY_NAME: (binary.resolve(), links)}
    pending = [(posixpath.basename(links.interpreter), binary, links)]
    pending += [(name, binary, links) for name in links.needed]
    for library in shipped:
        library_links = read_links(library)
        found[library.name] = (library.resolve(), library_links)
        pending += [(name, library, library_links) for name in library_links.needed]
    while pending:
        name, needed_by, by_links = pending.pop(0)
        if name in found:
            continue
        if len(found) > _MAX_LIBRARIES:
            raise GlibcBundleError(f"{binary}: more than {_MAX_LIBRARIES} libraries in its closure")
        path = _find_library(name, needed_by, by_links, search)
        path_links = read_links(path)
        found[name] = (path, path_links)
        pending += [(n, path, path_links) for n in path_links.needed if n not in found]
    return found


def _make(target: Path, inputs: dict[str, Path]) -> None:
    if target.exists():  # left by an interrupted run
        shutil.rmtree(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        staging.chmod(0o755)
        for name, source in inputs.items():
            out = staging / name
            _tool([_STRIP, "--strip-unneeded", "-o", str(out), str(source)])
            executable = name in (AGENT_BINARY_NAME, LOADER_NAME)
            out.chmod(0o755 if executable else 0o644)
        (staging / "complete").write_text("".join(f"{n}\n" for n in sorted(inputs)))
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _find_library(name: str, needed_by: Path, links: ElfLinks, search: Sequence[Path]) -> Path:
    if "/" in name:
        raise GlibcBundleError(f"{needed_by} needs {name!r} by path; the bundle takes names only")
    origin = str(needed_by.resolve().parent)
    runpath = [Path(p.replace("$ORIGIN", origin).replace("${ORIGIN}", origin))
               for p in links.runpath]  # fmt: skip
    for directory in (*search, *runpath):
        candidate = directory / name
        if candidate.is_file() and _is_aarch64_elf(candidate):
            return candidate.resolve()
    looked = ", ".join(str(d) for d in (*search, *runpath))
    raise GlibcBundleError(
        f"{needed_by.name} needs {name}, which is in none of: {looked}. Install the library "
        "for aarch64 or put it beside the agent build's libraries"
    )


def _is_aarch64_elf(path: Path) -> bool:
    with open(path, "rb") as handle:
        header = handle.read(20)
    return (
        len(header) == 20 and header[:4] == b"\x7fELF" and header[4] == 2  # ELFCLASS64
        and int.from_bytes(header[18:20], "little") == _EM_AARCH64
    )  # fmt: skip


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _tool(argv: list[str]) -> str:
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise GlibcBundleError(
            f"{argv[0]} not found: install binutils for aarch64 with "
            "apt-get install -y binutils-aarch64-linux-gnu"
        ) from None
    except subprocess.TimeoutExpired:
        raise GlibcBundleError(f"{argv[0]} took over {_TOOL_TIMEOUT_S} s on {argv[-1]}") from None
    if result.returncode != 0:
        raise GlibcBundleError(f"{argv[0]} failed on {argv[-1]}: {result.stderr.strip()}")
    return result.stdout
