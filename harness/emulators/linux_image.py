"""The image of a board that boots: Debian's kernel and a root file system of Debian's
packages of the board's architecture (:mod:`harness.emulators.linux_arch`), built by the
harness from its lock (``agent/linux-board.lock`` for arm64, ``linux-board-amd64.lock``
for amd64) and cached.

Every package is named in the lock with its version, mirror path, SHA-256 and size; it is
downloaded from the Debian mirror (``$ET_HARNESS_DEBIAN_MIRROR``, default
``http://deb.debian.org``), checked against the lock before anything reads it, and
unpacked with ``dpkg-deb``. No root-only tool is used: the root file system is a folder
turned into an ext4 image by ``mke2fs -d``, the initramfs a ``newc`` archive written here.

The image is one cache entry (kind ``board``, :mod:`harness.lifecycle.cache_entry`,
``debian-<arch>-<hash>``): ``Image`` or ``vmlinuz`` (the kernel), ``initrd.cpio``
(busybox and the kernel's virtio and ext4 modules: they are modules in Debian's kernel),
``flash.ext4`` (the root file system: the
board's flash; each board boots a copy of it) and ``board.json`` (what it was made from).
Its name carries the hash of the lock and of the board's own files
(``agent/linux-board/``: init, rcS, inittab, profile, sshd_config, passwd, group,
shadow) as the board gets them: their ``@BOARD@``, ``@CONSOLE@`` and ``@MODULES@`` filled
in for its architecture.
See docs/linux-emu.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from harness import shipped
from harness.emulators.linux_arch import ARM64, BoardArch
from harness.errors import InfrastructureError
from harness.lifecycle.cache import cache_root
from harness.lifecycle.cache_entry import CacheEntry
from harness.lifecycle.disk import writing
from harness.untrusted.reading import read_bounded_text

MIRROR_ENV = "ET_HARNESS_DEBIAN_MIRROR"
DEFAULT_MIRROR = "http://deb.debian.org"
FLASH_SIZE = "160M"  # the ext4 image's size; sparse, about 25 MB of it used
# Unpacked but not kept on the flash: documentation (and usr/lib/<triplet>/gconv, the
# character set converters).
_PRUNED = ("usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/lintian")
_BOARD_FILES = ("init", "rcS", "inittab", "profile", "sshd_config", "passwd", "group", "shadow")
_LAYOUT_REVISION = 1  # bumped when the image's layout changes
_LOCK_MAX_BYTES = 64 << 10
_DEB_MAX_BYTES = 128 << 20  # the kernel package is about 60 MB
_BUILD_BYTES = 400 << 20  # downloads, the unpacked tree and the image, with room
_DOWNLOAD_TIMEOUT_S = 120
_LINE = re.compile(
    r"(?P<role>kernel|root) (?P<name>[a-z0-9][a-z0-9.+-]*) (?P<version>[0-9A-Za-z.+:~-]+) "
    r"(?P<archive>debian|debian-security) (?P<path>pool/[A-Za-z0-9._+~/-]+\.deb) "
    r"(?P<sha256>[0-9a-f]{64}) (?P<size>[0-9]{1,10})"
)
_PLACEHOLDERS = ("@BOARD@", "@CONSOLE@", "@MODULES@")  # in the board's files


class BoardImageError(RuntimeError, InfrastructureError):
    """The board's image could not be built: a package not fetched or not as locked."""


@dataclass(frozen=True)
class LockedPackage:
    """One line of the lock: a Debian package and what it must hash to."""

    role: str  # "kernel" or "root"
    name: str
    version: str
    archive: str  # "debian" or "debian-security"
    path: str  # its path in the archive, pool/...
    sha256: str
    size: int


@dataclass(frozen=True)
class BoardImage:
    """A built image: its files in the cache, and what it was made from."""

    root: Path
    arch: BoardArch = ARM64

    @property
    def kernel(self) -> Path:
        return self.root / self.arch.kernel_file

    @property
    def initrd(self) -> Path:
        return self.root / "initrd.cpio"

    @property
    def flash(self) -> Path:
        return self.root / "flash.ext4"

    def description(self) -> dict[str, object]:
        """``board.json``: the kernel's release and the packages, name to version."""
        return dict(json.loads((self.root / "board.json").read_text()))


def lock_file(arch: BoardArch = ARM64) -> Path:
    """The board's lock, shipped with the harness (``agent/linux-board.lock`` for arm64)."""
    return shipped.agent_dir() / arch.lock


def locked_packages(path: Path | None = None) -> tuple[LockedPackage, ...]:
    """The lock's packages, the kernel first; :class:`BoardImageError` naming the line
    that is not ``ROLE NAME VERSION ARCHIVE PATH SHA256 SIZE``."""
    path = path or lock_file()
    packages = []
    for number, line in enumerate(read_bounded_text(path, _LOCK_MAX_BYTES).splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line.strip())
        if match is None:
            raise BoardImageError(
                f"{path}:{number}: not 'ROLE NAME VERSION ARCHIVE PATH SHA256 SIZE' "
                "(role kernel or root, archive debian or debian-security); fix the line"
            )
        fields = match.groupdict()
        packages.append(LockedPackage(**{**fields, "size": int(fields["size"])}))  # type: ignore[arg-type]
    kernels = [p for p in packages if p.role == "kernel"]
    if len(kernels) != 1:
        raise BoardImageError(f"{path}: names {len(kernels)} kernel packages; name exactly one")
    return (*kernels, *(p for p in packages if p.role == "root"))


def image_dir(arch: BoardArch = ARM64) -> Path:
    """Where :func:`ensure_image` keeps the image of the current lock and board files."""
    digest = hashlib.sha256(f"r{_LAYOUT_REVISION}\n".encode())
    digest.update(lock_file(arch).read_bytes())
    for name in _BOARD_FILES:
        digest.update(name.encode() + b"\0" + board_file(name, arch))
    return cache_root() / "board" / f"debian-{arch.debian}-{digest.hexdigest()[:16]}"


def board_file(name: str, arch: BoardArch = ARM64) -> bytes:
    """The board's own file ``name`` (``agent/linux-board/``) as the board of ``arch``
    gets it: the emulator's name, the console's device and the initramfs's modules in."""
    text = (_board_files() / name).read_bytes()
    values = (arch.emulator, arch.console, arch.module_names)
    for placeholder, value in zip(_PLACEHOLDERS, values, strict=True):
        text = text.replace(placeholder.encode(), value.encode())
    return text


def ensure_image(arch: BoardArch = ARM64) -> BoardImage:
    """The board's image, built on first use and checked as a cache entry at every use;
    safe from parallel processes (one builds, the others wait and use it)."""
    image = BoardImage(image_dir(arch), arch)
    entry = CacheEntry("board", image.root)
    if entry.use():
        return image
    with entry.building() as intact:
        if intact:
            return image
        with (
            writing(
                image.root.parent, f"building the {arch.emulator} board image", needed=_BUILD_BYTES
            ),
            tempfile.TemporaryDirectory(dir=image.root.parent, prefix=".build-") as tmp,
        ):
            staging = Path(tmp) / "image"
            _build(Path(tmp), staging, arch)
            if image.root.exists():  # a partial tree from an interrupted build
                image.root.rename(Path(tmp) / "replaced")
            staging.rename(image.root)
        entry.commit()
    return image


def _board_files() -> Path:
    return shipped.agent_dir() / "linux-board"


def _build(tmp: Path, staging: Path, arch: BoardArch) -> None:
    lock = lock_file(arch)
    packages = locked_packages(lock)
    debs = {p.name: _download(p, tmp / "debs", lock) for p in packages}
    kernel, rootfs, initramfs = packages[0], tmp / "rootfs", tmp / "initramfs"
    staging.mkdir()
    for package in packages[1:]:
        _run(["dpkg-deb", "-x", str(debs[package.name]), str(rootfs)], f"unpack {package.name}")
    modules = initramfs / "modules"
    release = _unpack_kernel(debs[kernel.name], staging / arch.kernel_file, modules, arch)
    _furnish_root(rootfs, arch)
    _furnish_initramfs(rootfs, initramfs, arch)
    write_newc(initramfs, staging / "initrd.cpio")
    _run(
        ["mke2fs", "-q", "-F", "-t", "ext4", "-L", "et-flash", "-E", "root_owner=0:0",
         "-d", str(rootfs), str(staging / "flash.ext4"), FLASH_SIZE],
        "make the flash image",
    )  # fmt: skip
    described = {
        "kernel": {"package": kernel.name, "version": kernel.version, "release": release},
        "packages": {p.name: p.version for p in packages[1:]},
        "lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest(),
    }
    (staging / "board.json").write_text(json.dumps(described, indent=1, sort_keys=True) + "\n")


def mirror() -> str:
    """The Debian mirror's root URL (``$ET_HARNESS_DEBIAN_MIRROR``), checked."""
    url = os.environ.get(MIRROR_ENV, "").strip() or DEFAULT_MIRROR
    if not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?", url):
        raise BoardImageError(
            f"{MIRROR_ENV}={url[:80]!r} is no http(s) URL of a Debian mirror; set it to one "
            f"(e.g. {DEFAULT_MIRROR}) or unset it"
        )
    return url.rstrip("/")


def _download(package: LockedPackage, folder: Path, lock: Path) -> Path:
    """The package fetched into ``folder`` and checked against the lock (size, SHA-256)."""
    folder.mkdir(parents=True, exist_ok=True)
    url = f"{mirror()}/{package.archive}/{package.path}"
    target = folder / f"{package.name}.deb"
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_S) as answer:
            with target.open("wb") as sink:
                while chunk := answer.read(1 << 20):
                    digest.update(chunk)
                    sink.write(chunk)
                    if sink.tell() > min(package.size, _DEB_MAX_BYTES):
                        break
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        raise BoardImageError(
            f"cannot fetch {package.name} {package.version} from {url}: {exc}; check that the "
            f"Debian mirror is reachable (or set {MIRROR_ENV})"
        ) from None
    size = target.stat().st_size
    if size != package.size or digest.hexdigest() != package.sha256:
        raise BoardImageError(
            f"{package.name} {package.version} from {url} is not the locked file ({size} bytes, "
            f"sha256 {digest.hexdigest()[:16]}..., locked {package.size} bytes, "
            f"{package.sha256[:16]}...): the mirror no longer has it or it was altered; "
            f"update {lock.name} to the mirror's version"
        )
    return target


def _unpack_kernel(deb: Path, image: Path, modules: Path, arch: BoardArch) -> str:
    """The kernel (``boot/vmlinuz-*``) and the initramfs's modules out of the kernel
    package (read as ``dpkg-deb --fsys-tarfile`` gives it); the kernel's release."""
    wanted = {f"{m}.ko" for m in arch.modules}
    modules.mkdir(parents=True)
    release = None
    with subprocess.Popen(
        ["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as child:
        assert child.stdout is not None
        with tarfile.open(fileobj=child.stdout, mode="r|") as archive:
            for member in archive:
                name = member.name.removeprefix("./")
                parts = name.split("/")
                if member.isfile() and re.fullmatch(r"boot/vmlinuz-[0-9A-Za-z.+_-]+", name):
                    release = name.removeprefix("boot/vmlinuz-")
                    _copy_member(archive, member, image)
                elif member.isfile() and name.startswith("lib/modules/") and len(parts) > 4:
                    if "/".join(parts[4:]) in wanted:
                        _copy_member(archive, member, modules / parts[-1])
        child.wait()
    found = {p.name for p in modules.iterdir()}
    missing = sorted(w for w in wanted if w.rpartition("/")[2] not in found)
    if child.returncode != 0 or release is None or missing:
        raise BoardImageError(
            f"{deb.name}: no kernel Image or modules {', '.join(missing) or '(none missing)'} "
            f"(dpkg-deb exit code {child.returncode}); the locked kernel package is not one "
            "this board can boot"
        )
    return release


def _copy_member(archive: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    source = archive.extractfile(member)
    assert source is not None
    with source, target.open("wb") as sink:
        shutil.copyfileobj(source, sink)


def _furnish_root(rootfs: Path, arch: BoardArch) -> None:
    """The board's own files, the folders the boot needs and busybox as init and shell."""
    for pruned in (*_PRUNED, f"usr/lib/{arch.triplet}/gconv"):
        shutil.rmtree(rootfs / pruned, ignore_errors=True)
    for folder in ("proc", "sys", "dev", "run", "tmp", "root", "usr/bin", "usr/sbin",
                   "var/empty", "sbin", "etc/init.d"):  # fmt: skip
        (rootfs / folder).mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    (rootfs / "root").chmod(0o700)
    placed = {"rcS": ("etc/init.d/rcS", 0o755), "inittab": ("etc/inittab", 0o644),
              "sshd_config": ("etc/ssh/sshd_config", 0o644), "passwd": ("etc/passwd", 0o644),
              "group": ("etc/group", 0o644), "shadow": ("etc/shadow", 0o600),
              "profile": ("etc/profile", 0o644)}  # fmt: skip
    for name, (where, mode) in placed.items():
        (rootfs / where).write_bytes(board_file(name, arch))
        (rootfs / where).chmod(mode)
    for link in ("bin/sh", "sbin/init"):
        (rootfs / link).unlink(missing_ok=True)
        (rootfs / link).symlink_to("/bin/busybox")


def _furnish_initramfs(rootfs: Path, initramfs: Path, arch: BoardArch) -> None:
    for folder in ("bin", "dev", "proc", "sys", "newroot"):
        (initramfs / folder).mkdir(parents=True, exist_ok=True)
    shutil.copy2(rootfs / "bin/busybox", initramfs / "bin/busybox")
    (initramfs / "init").write_bytes(board_file("init", arch))
    (initramfs / "init").chmod(0o755)


def write_newc(folder: Path, target: Path) -> None:
    """``folder`` as a ``newc`` cpio archive (the initramfs format the kernel reads),
    owned by root, in a stable order."""
    with target.open("wb") as sink:
        number = 0
        for directory, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted([*dirs, *files]):
                path = Path(directory, name)
                info = path.lstat()
                if stat.S_ISLNK(info.st_mode):
                    data = os.readlink(path).encode()
                else:
                    data = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
                number += 1
                _newc_entry(sink, number, path.relative_to(folder).as_posix(), info.st_mode, data)
        _newc_entry(sink, 0, "TRAILER!!!", 0, b"")


def _newc_entry(sink: object, number: int, name: str, mode: int, data: bytes) -> None:
    fields = (number, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0)
    header = b"070701" + "".join(f"{v:08X}" for v in fields).encode() + name.encode() + b"\0"
    write = sink.write  # type: ignore[attr-defined]
    write(header + b"\0" * (-len(header) % 4))
    write(data + b"\0" * (-len(data) % 4))


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BoardImageError(
            f"cannot {what}: `{' '.join(argv)}` exit code {done.returncode}: "
            f"{done.stderr.strip()[-500:]}"
        )
