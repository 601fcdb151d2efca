"""linux-emu: an arm64 board that boots, under ``qemu-system-aarch64 -M virt``; and its
x86_64 twin linux-kvm, under ``qemu-system-x86_64 -M q35`` with KVM (the board's
architecture: :mod:`harness.emulators.linux_arch`).

Debian's kernel boots a root file system of Debian's packages (glibc, the
real OpenSSH server, busybox as init and shell) from the board's flash: a copy of the
cached image (:mod:`harness.emulators.linux_image`) in this emulator's directory, kept
across power cycles while the emulator lives. Its power goes through labgrid's own
``QEMUDriver`` and the boot through a labgrid strategy (off -> console shell -> SSH,
:mod:`harness.emulators.linux_strategy`); SSH reaches the board through QEMU's user
networking, forwarded from 127.0.0.1 only; its host key is made here, handed to the
board at every power-on on a seed disk and pinned in the client files (never accepted
on first sight). The serial
console is kept in ``console.log``. The agent runs on the board's own kernel: nothing
of qemu-user. See docs/linux-emu.md.

Needs qemu-system-arm (``qemu-system-aarch64``; linux-kvm: qemu-system-x86's
``qemu-system-x86_64`` and a usable ``/dev/kvm``), openssh-client (``ssh-keygen``),
e2fsprogs (``mke2fs``), dpkg (``dpkg-deb``) (checked as the device is opened:
:mod:`harness.devices.host_tools`) and labgrid (the ``[lab]`` extra); no root.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import tarfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.emulators.linux_arch import ARM64, BoardArch
from harness.emulators.linux_image import BoardImage, BoardImageError, ensure_image
from harness.emulators.linux_strategy import strategy_class
from harness.emulators.ssh import SshBoardFiles, ensure_key, write_private
from harness.errors import InfrastructureError
from harness.lifecycle import owner
from harness.lifecycle.process import free_port

DEVICE_USER = "root"  # the board's own root: the agent may reboot it (REBOOT)
LISTEN_HOST = "127.0.0.1"
# After console=<the board's>. Not quiet: the console log of a board that does not come
# back shows how far the kernel got (ShellDriver's "dmesg -n 1" quiets it once logged in).
_BOOT_ARGS = "panic=-1"
LOGIN_PROMPT = " login: "  # busybox getty's, as ShellDriver waits for it
_KEPT_BYTES = 1 << 20  # the most of a console log a failed step carries (its end)
_SEED_BYTES = 64 << 10  # the seed disk: a tar of the host key and the authorized key


class LinuxEmulatorError(RuntimeError, InfrastructureError):
    """The board could not be built, powered on, booted or reached; the message names
    the step (image, power-on, boot, login, SSH, reboot) and where its console log is,
    which the error carries (``kept``, up to the failure: its directory may go)."""


class LinuxEmulator(SshBoardFiles):
    """One booted board of ``arch`` (see the module). After :meth:`start`, ``directory`` holds
    ``ssh_config`` (host ``alias``), ``known_hosts``, the client key, ``flash.img`` and
    ``console.log``. :meth:`cut_power` is the power cut a fault injector uses."""

    def __init__(
        self,
        directory: Path,
        *,
        arch: BoardArch = ARM64,
        alias: str | None = None,
        memory: str = "512M",
        boot_timeout: int = 60,
        image: BoardImage | None = None,
        listen_host: str = LISTEN_HOST,
        port: int = 0,
        authorized_key: Path | None = None,
    ) -> None:
        self.directory = directory.resolve()
        self.arch = arch
        self.alias = alias or arch.emulator
        self.user = DEVICE_USER
        self.host = listen_host  # a loopback address: an emulated lab's exporter host's
        self.port = port  # 0: chosen at the first power-on
        # The public key the board's sshd accepts (a lab's one client key); None: its own
        self._authorized_key = authorized_key
        self._memory = memory
        self._boot_timeout = boot_timeout
        self._image = image
        self._environment: Any = None  # labgrid's Environment, while powered
        self._strategy: Any = None
        self._console: ConsoleLog | None = None
        self._qemu_pid: int | None = None
        self.boot_seconds: float | None = None  # power-on to SSH, of the last boot

    @property
    def flash(self) -> Path:
        """The board's flash: its root file system, agent and programs included."""
        return self.directory / "flash.img"

    @property
    def console_log(self) -> Path:
        return self.directory / "console.log"

    @property
    def image(self) -> BoardImage:
        """The image this board boots (built on first use)."""
        if self._image is None:
            try:
                self._image = ensure_image(self.arch)
            except BoardImageError as exc:
                raise LinuxEmulatorError(f"{self.arch.emulator}: image: {exc}") from exc
        return self._image

    @property
    def settings(self) -> dict[str, object]:
        """The ssh transport fields that reach this board (through its ``ssh_config``)."""
        return {"host": self.alias, "ssh_config": str(self.ssh_config)}

    def start(self) -> Mapping[str, object]:
        """Power the board on and boot it to SSH; returns :attr:`settings`."""
        if self._strategy is not None:
            raise LinuxEmulatorError(f"{self.arch.emulator} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        image = self.image
        if not self.flash.exists():
            _copy_sparse(image.flash, self.flash)
        try:
            self._power_on(image)
        except BaseException:
            self.kill()
            raise
        return self.settings

    def stop(self) -> None:
        """Power off (labgrid's ``QEMUDriver.off``) and let go of labgrid; safe twice."""
        if self._console is not None:
            self._console.flush()
        if self._strategy is not None:
            try:
                self._strategy.transition("off")
            except Exception:
                self.kill()
        self._release()

    def kill(self) -> None:
        """End the board abruptly, as a crash would: :meth:`cut_power`."""
        self.cut_power()

    def cut_power(self) -> None:
        """Cut the board's power at once: its QEMU is killed, whatever the guest was
        writing; the flash keeps what reached it. :meth:`start` boots it again. This is
        the power cut a fault injector calls (docs/linux-emu.md)."""
        pid, self._qemu_pid = self._qemu_pid, None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            owner.current().remove_process(pid)
        if self._console is not None:
            self._console.flush()  # what it printed before the cut, still in the socket
        if self._strategy is not None:
            self._strategy.forget_power()
        self._release()

    def power_cycle(self) -> None:
        """Cut the power and boot again to SSH (the same flash)."""
        self.cut_power()
        self.start()

    def reboot(self) -> None:
        """A real reboot of the board's kernel (``reboot`` on its console), back to SSH."""
        if self._console is not None:
            self._console.flush()  # what it printed while up, before the reboot's lines
        self._rebooted(lambda strategy: strategy.reboot())

    def await_reboot(self) -> None:
        """The board's kernel was asked to reboot otherwise (the agent answered the
        wire's REBOOT and its session ended): wait until it is back, to SSH. The console
        is read from where the strategy left it: the reboot's lines are there."""
        self._rebooted(lambda strategy: strategy.await_reboot())

    def _rebooted(self, reboot: Any) -> None:
        if self._strategy is None or self._console is None:
            raise LinuxEmulatorError(f"{self.arch.emulator} is not running: nothing to reboot")
        started = time.monotonic()
        strategy = self._strategy
        self._run_step("reboot", lambda: reboot(strategy))
        self._wait_for_ssh()
        self.boot_seconds = time.monotonic() - started

    def kernel_release(self) -> str:
        """The release of the kernel the board boots (``uname -r`` on it)."""
        return str(self.image.description()["kernel"]["release"])  # type: ignore[index]

    def describe(self) -> str:
        """One line for ``et-harness doctor``: the kernel, the image, the last boot's time."""
        kernel = self.image.description()["kernel"]
        assert isinstance(kernel, dict)
        boot = f"  boot={self.boot_seconds:.1f} s" if self.boot_seconds is not None else ""
        return (
            f"kernel={kernel['release']} ({kernel['package']} {kernel['version']})  "
            f"image={self.image.root}{boot}"
        )

    def __enter__(self) -> LinuxEmulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _power_on(self, image: BoardImage) -> None:
        try:
            from labgrid import Environment
        except ImportError:
            raise LinuxEmulatorError(
                f"{self.arch.emulator}: its power and boot go through labgrid, the [lab] extra: "
                "pip install 'executorch-hil-harness[lab]'"
            ) from None

        strategy_class()  # registered with labgrid's factory before the target is made
        started = time.monotonic()
        ensure_key(self.host_key, f"{self.arch.emulator} host key")
        ensure_key(self.client_key, f"{self.arch.emulator} client key")
        seed = self.directory / "seed.tar"
        authorized = self._authorized_key or self.client_key.with_suffix(".pub")
        _write_seed(seed, self.host_key, authorized)
        # One port for the emulator's life: a transport that resolved it before a power
        # cut or a restart reaches the board again at the same address.
        self.port = self.port or free_port(self.host)
        config = self.directory / "labgrid-env.yaml"
        config.write_text(json.dumps(self._environment_config(image, seed)))
        self._environment = Environment(str(config))
        target = self._environment.get_target("main")
        # QEMUDriver asks the QEMU binary its version as it is made: a power cut then
        # kills that QEMU, a failed power-on like any other
        qemu = self._run_step("power-on", lambda: target.get_driver("QEMUDriver"))
        self._console = ConsoleLog(self.console_log, qemu)
        self._strategy = target.get_driver("LinuxBoardStrategy")
        self._run_step("power-on", lambda: self._strategy.transition("on"))
        booting = self.console_log.stat().st_size
        self._run_step(
            lambda: "login" if LOGIN_PROMPT in self._console_since(booting) else "boot",
            lambda: self._strategy.transition("shell"),
        )
        self._qemu_pid = target.get_driver("QEMUDriver")._child.pid
        owner.current().add_process(self._qemu_pid, f"{self.arch.emulator} qemu")
        self._run_step("SSH", lambda: self._strategy.transition("ssh"))
        self._wait_for_ssh()
        self.write_client_files()
        self.boot_seconds = time.monotonic() - started

    def _environment_config(self, image: BoardImage, seed: Path) -> dict[str, object]:
        arch = self.arch
        disks = [
            "-drive", f"if=none,format=raw,file={self.flash},id=flash",
            "-device", f"virtio-blk-{arch.virtio},drive=flash,serial=et-flash",
            "-drive", f"if=none,format=raw,file={seed},id=seed,readonly=on",
            "-device", f"virtio-blk-{arch.virtio},drive=seed,serial=et-seed",
            "-netdev", f"user,id=net0,hostfwd=tcp:{self.host}:{self.port}-:22",
            "-device", f"virtio-net-{arch.virtio},netdev=net0",
            "-device", f"virtio-rng-{arch.virtio}",
            "-initrd", str(image.initrd),
            "-smp", "1", "-nodefaults", "-no-user-config", *arch.accel,
        ]  # fmt: skip
        qemu = {
            "qemu_bin": "qemu", "machine": arch.machine, "cpu": arch.cpu, "memory": self._memory,
            "kernel": "kernel", "boot_args": f"console={arch.console} {_BOOT_ARGS}",
            "extra_args": _shell_words(disks),
        }  # fmt: skip
        shell = {
            "prompt": rf"root@{arch.emulator}:[^ ]*# ", "login_prompt": LOGIN_PROMPT,
            "username": "root", "login_timeout": self._boot_timeout, "await_login_timeout": 1,
        }  # fmt: skip
        drivers = {"QEMUDriver": qemu, "ShellDriver": shell, "LinuxBoardStrategy": {}}
        return {
            "targets": {"main": {"drivers": drivers}},
            "tools": {"qemu": shutil.which(arch.qemu) or arch.qemu},
            "images": {"kernel": str(image.kernel)},
        }

    def _run_step(self, name: str | Callable[[], str], action: Any) -> Any:
        """``action()``; its failure one :class:`LinuxEmulatorError` naming the step
        (``name``, or what ``name()`` tells once it failed: boot or login)."""
        try:
            return action()
        except Exception as exc:
            step = name if isinstance(name, str) else name()
            raise self._failed(f"{step} failed: {_cause(exc)}") from exc

    def _failed(self, what: str) -> LinuxEmulatorError:
        """The error of a failed step (``what``), with the console's last two lines, naming
        the console log and carrying it (:attr:`LinuxEmulatorError.kept`)."""
        if self._console is not None:
            self._console.flush()  # what the board printed last, still in the socket
        kept = self._console_since(0)
        lines = [line.strip()[:100] for line in kept.splitlines() if line.strip()][-2:]
        said = f"; the console's last lines: {' | '.join(lines)!r}" if lines else ""
        error = LinuxEmulatorError(
            f"{self.arch.emulator}: {what}{said}; console log: {self.console_log}"
        )
        if self.console_log.is_file():
            error.kept = ((str(self.console_log), kept.encode("utf-8", "replace")),)
        return error

    def _console_since(self, offset: int) -> str:
        """The console log from byte ``offset`` on (its last :data:`_KEPT_BYTES` at most)."""
        try:
            with self.console_log.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(offset, size - _KEPT_BYTES))
                return log.read(_KEPT_BYTES).decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def _wait_for_ssh(self) -> None:
        deadline = time.monotonic() + self._boot_timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                # The whole time left for the banner: sshd starts a process per connection,
                # seconds on a loaded machine's emulated CPU; an early hang-up never sees it.
                with socket.create_connection((self.host, self.port), timeout=left) as conn:
                    if conn.recv(8).startswith(b"SSH-"):
                        return
            except OSError:
                pass
            time.sleep(0.05)  # refused or closed at once (QEMU forwards before sshd listens)
        raise self._failed(
            f"SSH failed: no SSH banner on {self.host}:{self.port} within "
            f"{self._boot_timeout} s of sshd starting"
        )

    def _release(self) -> None:
        if self._console is not None:
            self._console.close()
            self._console = None
        if self._environment is not None:
            self._environment.cleanup()
        self._environment = self._strategy = None


class ConsoleLog:
    """The board's serial console, as labgrid's QEMUDriver reads it, kept in a file: every
    read of the strategy's drivers (boot, login, commands), and what the board printed
    while it was up, read at :meth:`flush` (before a power cut, a reboot or a stop).

    All reads happen on the thread that drives labgrid (its steps are one stack). Once
    the board is up its console is quiet (``dmesg -n 1`` as the shell logs in): what it
    prints meanwhile waits in the socket until the next flush.
    """

    _FLUSH_BYTES = 1 << 20  # at most this much read at one flush

    def __init__(self, path: Path, driver: Any) -> None:
        from labgrid.step import steps

        self._driver = driver
        self._file = path.open("ab")
        self._steps = steps
        steps.subscribe(self._notify)

    def _notify(self, event: Any) -> None:
        step = event.step
        if step.tag == "console" and step.source is self._driver and step.title == "read":
            data = event.data.get("result")
            if isinstance(data, bytes) and data and not self._file.closed:
                self._file.write(data)
                self._file.flush()

    def flush(self) -> None:
        """Read what the console holds now into the log."""
        read = 0
        while read < self._FLUSH_BYTES:
            try:
                data = self._driver.read(size=4096, timeout=0.05)
            except Exception:
                return
            if not data:
                return
            read += len(data)

    def close(self) -> None:
        self._steps.unsubscribe(self._notify)
        self._file.close()


def _write_seed(path: Path, host_key: Path, client_public_key: Path) -> None:
    """The seed disk: a tar (owned by root) of the host key and the authorized key."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for source, name, mode in (
            (host_key, "ssh_host_ed25519_key", 0o600),
            (client_public_key, "authorized_keys", 0o644),
        ):
            data = source.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            archive.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    write_private(path, "")
    path.write_bytes(data + b"\0" * (_SEED_BYTES - len(data)))


def _copy_sparse(source: Path, target: Path) -> None:
    """A copy of the image's flash that takes only the blocks in use."""
    staging = target.with_name(f".{target.name}.tmp")
    with source.open("rb") as reading, staging.open("wb") as writing:
        while block := reading.read(1 << 20):
            if block.count(0) == len(block):
                writing.seek(len(block), os.SEEK_CUR)
            else:
                writing.write(block)
        writing.truncate()
    staging.replace(target)


def _shell_words(argv: list[str]) -> str:
    """``argv`` as the one string QEMUDriver's ``extra_args`` takes (it splits it back
    with shlex; no shell ever reads it)."""
    import shlex

    return shlex.join(argv)


def _cause(exc: BaseException) -> str:
    """The innermost cause's text (labgrid wraps what failed in a StrategyError)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
