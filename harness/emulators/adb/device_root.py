"""The device's private file system: a host directory that is ``/`` for every device process.

:func:`prepare_device_root` lays out the directory; :class:`DeviceNamespace` starts a
keeper process in a new mount namespace, read-only bind-mounts the host's ``/usr``,
``/etc`` and ``/sys`` (and ``/dev``, ``/proc``) into the root, covers the host's aarch64
sysroot with empty directories (a phone has no glibc) and chroots into it.
Device commands join that namespace with ``nsenter``; sync reads and writes device
files through ``/proc/KEEPER/root``. Nothing is mounted in the host's namespace, and
the host's own ``/data`` is never touched: the device's ``/data/local/tmp`` is
``ROOT/data/local/tmp``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from harness.emulators.adb.properties import DeviceProperties
from harness.errors import InfrastructureError

_READ_ONLY_BINDS = ("usr", "etc", "sys")
_RECURSIVE_BINDS = ("dev", "proc")
# The host's aarch64 user space, which a phone does not have: each is covered with an
# empty read-only tmpfs, so an arm64 program on the device finds no glibc but its own.
HIDDEN_HOST_DIRS = ("usr/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib/gcc-cross")
# Top-level entries that Debian's merged /usr makes symlinks (bin -> usr/bin ...).
_USR_ALIASES = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_MAX_SYMLINK_HOPS = 40

DEVICE_PATH = "/system/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_GETPROP = r"""#!/bin/sh
# getprop for adb-emu: reads key=value lines from /system/build.prop.
if [ "$#" -eq 0 ]; then
    exec awk '{ i = index($0, "=")
                if (i) printf "[%s]: [%s]\n", substr($0, 1, i - 1), substr($0, i + 1) }' \
        /system/build.prop
fi
KEY="$1" FALLBACK="${2-}" exec awk '
    { i = index($0, "=")
      if (i && substr($0, 1, i - 1) == ENVIRON["KEY"]) {
          print substr($0, i + 1); found = 1; exit } }
    END { if (!found) print ENVIRON["FALLBACK"] }' /system/build.prop
"""


# Where a phone has bionic's dynamic linker. adb-emu has none; the file is there so the
# device's layout is a phone's (the harness looks for it), and says so if run.
_LINKER64 = """#!/bin/sh
echo "linker64: adb-emu has no bionic linker (only Android's file layout is emulated)" >&2
exit 127
"""


class DeviceRootError(RuntimeError, InfrastructureError):
    """The device root cannot be prepared or entered."""


def prepare_device_root(root: Path, properties: DeviceProperties) -> None:
    """Create the device's directories, ``/system/bin/{sh,getprop,linker64}`` and mount points.

    Existing device files (``/data``, ``/tmp``) are kept, so a restarted device finds
    what was pushed before.
    """
    for directory in ("data/local/tmp", "tmp", "system/bin", *_READ_ONLY_BINDS, *_RECURSIVE_BINDS):
        (root / directory).mkdir(parents=True, exist_ok=True)
    (root / "data/local/tmp").chmod(0o771)
    (root / "tmp").chmod(0o1777)
    for name in _USR_ALIASES:
        host, mine = Path("/") / name, root / name
        if host.is_symlink() and not mine.is_symlink():
            mine.symlink_to(os.readlink(host))
        elif not host.is_symlink() and host.is_dir():
            mine.mkdir(exist_ok=True)
    sh = root / "system/bin/sh"
    if not sh.is_symlink():
        sh.symlink_to("/bin/sh")
    for name, text in (("getprop", _GETPROP), ("linker64", _LINKER64)):
        tool = root / "system/bin" / name
        tool.write_text(text, encoding="utf-8")
        tool.chmod(0o755)
    (root / "system/build.prop").write_text(properties.build_prop(), encoding="utf-8")


class DeviceNamespace:
    """A mount namespace whose root is the device root, held open by a keeper process.

    The keeper (``cat`` reading a pipe from this process) exits when this process dies,
    so the namespace and its mounts never outlive the daemon.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._keeper: subprocess.Popen[bytes] | None = None
        self._tools: dict[str, str] = {}

    def start(self) -> None:
        """Start the keeper; :class:`DeviceRootError` if mounting or chroot fails."""
        if os.geteuid() != 0:
            raise DeviceRootError(
                "adb-emu needs root to give the device a private root with mount namespaces; "
                "run it as root (as CI does)"
            )
        for tool in ("unshare", "nsenter", "setpriv", "chroot", "mount"):
            found = shutil.which(tool)
            if found is None:
                raise DeviceRootError(f"{tool} not found: install util-linux and coreutils")
            self._tools[tool] = found
        self._keeper = subprocess.Popen(
            [
                self._tools["unshare"],
                "--mount",
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-c",
                self._mount_script(),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self._keeper.stdout is not None
        ready = self._keeper.stdout.readline()
        if ready != b"ready\n":
            _, stderr = self._keeper.communicate(timeout=10)
            self._keeper = None
            reason = stderr.decode(errors="replace").strip()
            raise DeviceRootError(f"could not enter device root {self.root}: {reason}")

    def stop(self) -> None:
        """End the keeper; device processes still running keep their own view."""
        keeper, self._keeper = self._keeper, None
        if keeper is None:
            return
        keeper.kill()
        keeper.communicate()

    @property
    def keeper_pid(self) -> int:
        if self._keeper is None:
            raise DeviceRootError("the device namespace is not started")
        return self._keeper.pid

    def command_argv(self, shell_argv: list[str]) -> list[str]:
        """Argv that runs ``shell_argv`` inside the device root, in a fresh PID namespace.

        Killing the returned process (``unshare``) kills everything the command started:
        ``--kill-child`` takes down the namespace's init, and with it the namespace.
        ``setpriv --pdeathsig`` does the same if the daemon itself dies. The init is a
        plain ``sh`` that waits for the command, so the command is not PID 1 (which the
        kernel shields from its own ``kill``/``raise``) and its exit status is passed on.
        """
        tools = self._tools  # host paths under /usr, which the device root shares
        return [
            tools["nsenter"], f"--target={self.keeper_pid}", "--mount", "--root", "--wd",
            tools["setpriv"], "--pdeathsig", "KILL", "--",
            tools["unshare"], "--pid", "--fork", "--kill-child", "--",
            "/bin/sh", "-c", '"$@"; exit "$?"', "adb-emu-init",
            *shell_argv,
        ]  # fmt: skip

    def host_path(self, device_path: str, *, follow_last: bool = True) -> Path:
        """Where ``device_path`` is, seen from the daemon: symlinks resolve inside the root.

        Relative paths are taken from ``/`` (adbd's working directory); ``..`` stops at
        ``/``. With ``follow_last=False`` a final symlink is not followed (as lstat).
        """
        base = Path(f"/proc/{self.keeper_pid}/root")
        pending = _components(device_path)
        last = pending[-1] if pending and not follow_last and pending[-1] != ".." else None
        if last is not None:
            pending.pop()
        resolved: list[str] = []
        hops = 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = base.joinpath(*resolved, part)
            if not candidate.is_symlink():
                resolved.append(part)
                continue
            hops += 1
            if hops > _MAX_SYMLINK_HOPS:
                raise OSError(40, "Too many levels of symbolic links", device_path)
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            pending = _components(target) + pending
        if last is not None:
            resolved.append(last)
        return base.joinpath(*resolved)

    def _mount_script(self) -> str:
        root = self.root
        lines = ["set -e"]
        for name in _READ_ONLY_BINDS:
            lines.append(f"mount --bind -o ro /{name} {shlex.quote(str(root / name))}")
        for name in _RECURSIVE_BINDS:
            lines.append(f"mount --rbind /{name} {shlex.quote(str(root / name))}")
        for name in _USR_ALIASES:
            host = Path("/") / name
            if host.is_dir() and not host.is_symlink():
                lines.append(f"mount --bind -o ro /{name} {shlex.quote(str(root / name))}")
        for name in HIDDEN_HOST_DIRS:
            if (Path("/") / name).is_dir():
                target = shlex.quote(str(root / name))
                lines.append(f"mount -t tmpfs -o ro,size=4k,mode=0755 adb-emu-hidden {target}")
        lines.append(
            f"exec chroot {shlex.quote(str(root))} /bin/sh -c 'echo ready; exec cat >/dev/null'"
        )
        return "\n".join(lines)


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]
