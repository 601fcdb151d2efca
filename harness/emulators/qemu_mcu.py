"""qemu-mcu: the MCU agent firmware on an emulated board (QEMU mps2-an385, mps3-an547).

:func:`build_firmware` builds ``agent/mcu`` for one board (:mod:`harness.config.mcu_boards`) with
Debian's ``arm-none-eabi-gcc``/``g++`` against the ExecuTorch SDK's headers
(:func:`harness.agent.sdk.ensure_sdk`), once per source hash (cached under the harness
cache, ``mcu-firmware/``, safe to call from parallel test workers). :class:`QemuMcu`
starts ``qemu-system-arm -M <machine>`` with the board's UART0 on a TCP server socket
(``-serial tcp:127.0.0.1:PORT,server=on,wait=on,nodelay=on``) and its CPU stopped (``-S``):
:meth:`QemuMcu.connect` lets the CPU run (:meth:`QemuMcu.run`: ``cont`` on the monitor,
QEMU's stdin) only once its port is open. Letting it run when the client connects
(``wait=on`` alone) lost the boot HELLO now and then: pyserial's ``socket://`` open
discards what arrived after its connect (``reset_input_buffer``), and the firmware's boot
HELLO sometimes arrived in between.
Connect with :mod:`harness.link.serial.port` (``socket://127.0.0.1:PORT``); stop with
:meth:`QemuMcu.shutdown` (the firmware exits through semihosting with the status asked for)
or :meth:`QemuMcu.stop`. See docs/mcu.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from subprocess import PIPE

from filelock import FileLock

from harness.agent.sdk import EXECUTORCH_VERSION, SdkError, ensure_sdk, host_abi
from harness.config.mcu_boards import DEFAULT_MACHINE, board
from harness.lifecycle.cache import cache_root
from harness.lifecycle.process import STOP_GRACE, ManagedProcess, on_free_port
from harness.link.serial.arq import BootHelloMissing, LinkConfig, SerialLink
from harness.link.serial.port import SerialPortConfig
from harness.link.serial.port import connect as connect_port
from harness.transport.base import DeviceUnavailable, TransportError, TransportTimeout

ROOT = Path(__file__).resolve().parents[2]
FIRMWARE_SOURCES = ROOT / "agent" / "mcu"
CODEC_SOURCES = ROOT / "agent" / "codec"
DEFAULT_CACHE = cache_root() / "mcu-firmware"
FIRMWARE_NAME = "etb-mcu.elf"
QEMU = "qemu-system-arm"
CROSS_GCC = "arm-none-eabi-gcc"
CROSS_GXX = "arm-none-eabi-g++"
LISTEN_HOST = "127.0.0.1"
_BUILD_TIMEOUT_S = 300
# QEMU translates the firmware as it boots: on a loaded 2-core machine its boot HELLO
# took over the serial link's 5 s default, so a board of ours gets this long.
BOOT_TIMEOUT_S = 20.0
_BIND_ATTEMPTS = 5
_WAITING = "waiting for connection on: "
_RUN_CPU = b"cont\n"  # the monitor command that lets the stopped CPU run
_EVIDENCE_LINES = 10  # of QEMU's stderr, in the error when the boot HELLO is missing


class FirmwareBuildError(RuntimeError):
    """The firmware could not be built; the message carries the compiler's output."""


class QemuError(DeviceUnavailable):
    """QEMU could not be started, or did not start listening in time."""


class QemuTimeout(TransportTimeout):
    """QEMU went on running when it should have ended."""


def firmware_source_hash(machine: str = DEFAULT_MACHINE) -> str:
    """SHA-256 over the board, the firmware and codec sources, the Makefile, the SDK
    version and the compiler version."""
    digest = hashlib.sha256(f"{board(machine).machine}\0{EXECUTORCH_VERSION}\0".encode())
    files = [
        *sorted(FIRMWARE_SOURCES.rglob("*")),
        *sorted((CODEC_SOURCES / "include").rglob("*")),
        *sorted((CODEC_SOURCES / "src").rglob("*")),
    ]
    for path in files:
        source = path.suffix in (".c", ".cpp", ".h", ".ld", "") and "build" not in path.parts
        if path.is_file() and source:
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    digest.update(_compiler_version().encode())
    return digest.hexdigest()


def _compiler_version() -> str:
    if shutil.which(CROSS_GCC) is None or shutil.which(CROSS_GXX) is None:
        raise FirmwareBuildError(
            f"{CROSS_GCC} or {CROSS_GXX} not found: install Debian's gcc-arm-none-eabi, "
            "libnewlib-arm-none-eabi and libstdc++-arm-none-eabi-newlib (ci/setup.sh does)"
        )
    done = subprocess.run([CROSS_GCC, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0] if done.stdout else ""


def build_firmware(
    machine: str = DEFAULT_MACHINE, cache_dir: Path = DEFAULT_CACHE, *, jobs: int = 2
) -> Path:
    """The firmware ELF for board ``machine`` and the current sources, built if not cached yet."""
    source_hash = firmware_source_hash(machine)
    target = cache_dir / source_hash
    elf = target / FIRMWARE_NAME
    if elf.is_file():
        return elf
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir / f"{source_hash}.lock")):
        if elf.is_file():
            return elf
        try:
            include = ensure_sdk(host_abi()).include
        except SdkError as exc:
            raise FirmwareBuildError(
                f"the firmware needs the ExecuTorch SDK's headers: {exc}"
            ) from None
        staging = Path(tempfile.mkdtemp(prefix=f"{source_hash[:12]}-", dir=cache_dir))
        try:
            done = subprocess.run(
                [
                    "make",
                    "-C",
                    str(FIRMWARE_SOURCES),
                    f"-j{jobs}",
                    f"BOARD={machine}",
                    f"BUILD={staging}",
                    f"BUILD_ID={source_hash[:12]}",
                    f"EXECUTORCH_INCLUDE={include}",
                    f"EXECUTORCH_VERSION={EXECUTORCH_VERSION}",
                ],
                capture_output=True,
                text=True,
                timeout=_BUILD_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                raise FirmwareBuildError(
                    f"building the MCU firmware for {machine} failed "
                    f"(make exit {done.returncode}):\n"
                    f"{(done.stdout + done.stderr)[-4000:]}"
                )
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return elf


def firmware_size(elf: Path) -> dict[str, int]:
    """``text``, ``data`` and ``bss`` bytes of a firmware ELF (arm-none-eabi-size)."""
    done = subprocess.run(
        ["arm-none-eabi-size", str(elf)], capture_output=True, text=True, check=True
    )
    header, values = done.stdout.splitlines()[:2]
    return {k: int(v) for k, v in zip(header.split()[:3], values.split()[:3], strict=True)}


class QemuMcu:
    """One QEMU board running the agent firmware built for it, its UART0 on a local TCP port."""

    def __init__(
        self,
        firmware: Path,
        *,
        machine: str = DEFAULT_MACHINE,
        qemu: str = QEMU,
        start_timeout: float = 10.0,
    ) -> None:
        self.firmware = firmware
        self.machine = board(machine).machine
        self._qemu = qemu
        self._start_timeout = start_timeout
        self._process: ManagedProcess | None = None
        self._running = False  # the CPU was let run (it is stopped at each start)
        self.port = 0

    @property
    def url(self) -> str:
        """The pyserial URL of the board's UART0."""
        return f"socket://{LISTEN_HOST}:{self.port}"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise QemuError("QEMU is not running; call start() first")
        return self._process.pid

    def argv(self, port: int) -> list[str]:
        """The QEMU command line for a UART0 server socket on ``port``, the CPU stopped
        until ``cont`` on the monitor (stdin)."""
        return [
            self._qemu,
            "-M",
            self.machine,
            "-nographic",
            "-S",
            "-monitor",
            "stdio",
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
            str(self.firmware),
            "-serial",
            f"tcp:{LISTEN_HOST}:{port},server=on,wait=on,nodelay=on",
        ]

    @property
    def settings(self) -> dict[str, object]:
        """The serial transport field that reaches the board: :attr:`url`."""
        return {"url": self.url}

    def start(self) -> dict[str, object]:
        """Start QEMU and return once its UART0 socket listens (the CPU stopped until the
        first :meth:`connect`); returns :attr:`settings`."""
        if shutil.which(self._qemu) is None:
            raise QemuError(f"{self._qemu} not found: install Debian's qemu-system-arm")
        port = on_free_port(self._launch, attempts=_BIND_ATTEMPTS, host=LISTEN_HOST)
        if port is None:
            raise QemuError(
                f"QEMU could not listen on a free local port in {_BIND_ATTEMPTS} attempts; "
                f"last output:\n{self.stderr_tail()}"
            )
        self.port = port
        return self.settings

    def _launch(self, port: int) -> bool:
        """True once QEMU listens on ``port``; False if the port was taken meanwhile."""
        if self._process is not None:
            self._process.stop()
        process = self._process = ManagedProcess(
            self.argv(port), name="qemu-system-arm", stdin=PIPE
        )
        self._running = False
        if process.wait_for_stderr(_WAITING, timeout=self._start_timeout):
            return True
        if process.poll() is None:
            self.stop()
            raise QemuError(
                f"QEMU did not listen on port {port} within {self._start_timeout:g} s:\n"
                f"{self.stderr_tail()}"
            )
        process.stop()
        if "Address already in use" in self.stderr_tail():
            return False
        raise QemuError(
            f"QEMU exited with status {process.returncode} before listening:\n{self.stderr_tail()}"
        )

    def stderr_tail(self) -> str:
        """QEMU's last lines of stderr (also the firmware's log lines, by semihosting)."""
        return self._process.stderr_tail() if self._process is not None else ""

    def wait_for_log(self, text: str, timeout: float = 5.0) -> bool:
        """Whether a stderr line holding ``text`` arrived within ``timeout`` (False once
        QEMU has ended without one)."""
        return self._process is not None and self._process.wait_for_stderr(text, timeout=timeout)

    def cpu_seconds(self) -> float:
        """User plus system CPU time QEMU has used so far (from /proc/PID/stat)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    def poll(self) -> int | None:
        """QEMU's exit status, or None while it runs."""
        return None if self._process is None else self._process.poll()

    def wait(self, timeout: float) -> int:
        """QEMU's exit status once it ends; :class:`QemuTimeout` if it runs on past ``timeout``."""
        if self._process is None:
            raise QemuError("QEMU was never started")
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise QemuTimeout(
                f"QEMU (pid {self._process.pid}) still runs after {timeout:g} s"
            ) from None

    def connect(self, link: LinkConfig | None = None) -> SerialLink:
        """A :class:`SerialLink` to the firmware. The first one since :meth:`start` lets
        the CPU run (:meth:`run`) once its port is open and requires the boot HELLO.

        QEMU serves one client at a time: close a link before connecting another.
        """
        first = not self._running
        config = SerialPortConfig(
            url=self.url, wait_boot=first, boot_timeout=None if link else BOOT_TIMEOUT_S
        )
        try:
            return connect_port(config, link=link, on_open=self.run if first else None)
        except BootHelloMissing as exc:
            status = self.poll()
            tail = "\n".join(self.stderr_tail().splitlines()[-_EVIDENCE_LINES:]) or "(none)"
            raise BootHelloMissing(
                f"{exc}\nQEMU {self.machine} (pid {self.pid}, "
                f"{'running' if status is None else f'exit status {status}'}), "
                f"last stderr:\n{tail}",
                exc.received,
            ) from None

    def run(self) -> None:
        """Let the CPU run (``cont``): the firmware boots and sends its boot HELLO. Do it
        once a client's port is open; :meth:`connect` does. Safe to call twice."""
        stdin = self._process.popen.stdin if self._process is not None else None
        if stdin is None:
            raise QemuError("QEMU is not running; call start() first")
        if self._running:
            return
        try:
            stdin.write(_RUN_CPU)
            stdin.flush()
        except OSError as exc:
            raise QemuError(
                f"cannot let QEMU's CPU run (its monitor is gone: {exc}); "
                f"last output:\n{self.stderr_tail()}"
            ) from None
        self._running = True

    def shutdown(
        self, link: SerialLink, code: int = 0, *, timeout: float = 2.0, attempts: int = 3
    ) -> int:
        """Ask the firmware to exit with ``code`` (semihosting); returns QEMU's exit status.

        The EXIT frame is resent if QEMU still runs (it may be lost on a faulty
        link); after ``attempts`` QEMU is killed and :class:`QemuTimeout` raised.
        """
        for _ in range(attempts):
            try:
                link.exit_device(code)
            except TransportError:
                pass  # the connection may already be gone because QEMU has exited
            try:
                return self.wait(timeout)
            except QemuTimeout:
                continue
        self.stop()
        raise QemuTimeout(
            f"the firmware did not exit after {attempts} EXIT frames; QEMU was killed"
        )

    def kill(self) -> None:
        """SIGKILL QEMU, as a board losing power would; stop() then tidies up."""
        if self._process is not None:
            self._process.kill()

    def stop(self, timeout: float = STOP_GRACE) -> int | None:
        """End QEMU (terminate, then kill); returns its exit status. Safe to call twice."""
        if self._process is None:
            return None
        return self._process.stop(timeout)

    def __enter__(self) -> QemuMcu:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
