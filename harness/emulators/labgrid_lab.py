"""An emulated labgrid lab on loopback: a real coordinator, real exporters, emulated devices.

What is real and what stands in:

- real: ``labgrid-coordinator`` (127.0.0.1), one ``labgrid-exporter`` per "host"
  (127.0.0.2, 127.0.0.3, ...), the ser2net each exporter starts for a place's
  ``RawSerialPort`` while it is acquired (bound to the exporter's own address by
  :mod:`harness.emulators.ser2net_loopback`), labgrid's client and its power
  protocol (``NetworkPowerPort``, model ``simplerest``), and with ``android_phones``
  one real adb server per phone host (``adb server nodaemon``; adb listens on
  127.0.0.1 or on every interface, never on one other address, so 127.0.0.1 it is);
- emulated (:mod:`harness.emulators.lab_devices`): each exporter's MCU board (QEMU
  running the agent firmware, its UART on a pty); with ``ssh_boards=K``, the first K
  exporters also export an emulated arm64 Linux board, ssh-emu's real sshd listening on
  the exporter's address (:mod:`harness.emulators.ssh`), as a ``NetworkService``
  (address, port, username); the lab publishes those boards' host keys in
  ``known_hosts`` beside the client key ``id_ed25519``, as a lab's admin would, and a
  profile pins them from there; with ``android_phones=K``, the first K exporters also
  have an arm64 phone, adb-emu on the exporter's address attached to that host's adb
  server. labgrid has no adb resource, so the phone's place carries what the harness
  needs as tags, as a lab's admin would set them: ``adb_serial`` (the phone as that
  server lists it) and ``adb_server`` (HOST:PORT); its exporter exports the phone's
  power port, which ties the place to the exporter;
- stand-in: the power switch (:class:`~harness.emulators.lab_devices.PowerSwitch`).

MCU places ``lab-a``, ``lab-b``, ... have tags ``kind=mcu pool=lab et_health=ok``
(devices/lab-mcu.yaml asks for the first two), SSH places ``ssh-a``, ... tags
``kind=linux pool=lab et_health=ok`` (devices/lab-linux.yaml), Android places
``android-a``, ... tags ``kind=android pool=lab et_health=ok`` plus the two adb tags
(devices/lab-android.yaml). With ``linux_boards=K``, the first K exporters also have a
Linux board that boots (linux-emu: Debian's arm64 kernel under QEMU), its SSH on the
exporter's address (a ``NetworkService``, user root) and its power on the stand-in
switch (a ``NetworkPowerPort``), as places ``boot-a``, ... tagged ``kind=linux_board
pool=lab et_health=ok`` (devices/lab-linux-board.yaml).

``python -m harness.emulators.emulated_lab [PLACES [SSH_BOARDS [PHONES [LINUX_BOARDS]]]]``
runs one until Ctrl-C, with the coordinator on 127.0.0.1:20408 and its SSH files in
``LAB_FILES``, the paths the shipped profiles name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from harness import shipped
from harness.emulators import ser2net_loopback
from harness.emulators.adb.server import PrivateAdbServer
from harness.emulators.lab_devices import (
    ConsoleFeed,
    EmulatedBoard,
    EmulatedPhone,
    LabError,
    PoweredLinuxBoard,
    PowerSwitch,
)
from harness.emulators.lab_places import (
    ANDROID_GROUP,
    BOOT_GROUP,
    BOOT_TAGS,
    GROUP,
    SSH_GROUP,
    SSH_TAGS,
    TAGS,
    AndroidPlace,
    LabPlace,
    LinuxBoardPlace,
    SshPlace,
)
from harness.emulators.mcu import build_firmware
from harness.emulators.ssh import Isolation, SshBoardFiles, SshEmulator, ensure_key
from harness.lifecycle.cache import cache_root
from harness.lifecycle.owner import owned_directory
from harness.lifecycle.process import ManagedProcess, free_port

COORDINATOR_HOST = "127.0.0.1"
LAB_FILES = Path("~/.cache/et-harness/labgrid-lab").expanduser()  # the worked example's
_READY_TIMEOUT_S = 30.0


def labgrid_program(name: str) -> str:
    """A labgrid program beside this Python (the harness's .venv) or on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise LabError(
            f"{name} not found: install the harness with its labgrid extra (bash ci/setup.sh)"
        )
    return found


class LabgridLab:
    """A coordinator, ``len(hosts)`` exporters (one board and one place each, and on the
    first few an SSH board and a phone with a place each), on loopback."""

    def __init__(
        self,
        hosts: tuple[str, ...] = ("127.0.0.2", "127.0.0.3"),
        port: int | None = None,
        ssh_boards: int = 0,
        files: Path | None = None,
        android_phones: int = 0,
        linux_boards: int = 0,
    ) -> None:
        self.hosts = hosts
        self._port = port
        self._ssh_boards = ssh_boards
        self._android_phones = android_phones
        self._linux_boards = linux_boards
        self._files = files  # known_hosts and id_ed25519; None: in the lab's own directory
        self.places: list[LabPlace] = []
        self.ssh_places: list[SshPlace] = []
        self.android_places: list[AndroidPlace] = []
        self.linux_board_places: list[LinuxBoardPlace] = []
        self._stack = contextlib.ExitStack()
        self.coordinator = ""
        self._coordinator_argv: list[str] = []
        self._directory = Path()
        self._coordinator_process: ManagedProcess | None = None
        self._exporters: dict[str, tuple[list[str], dict[str, str], Path]] = {}
        self._exporter_processes: dict[str, ManagedProcess] = {}
        self.known_hosts = Path()
        self.client_key = Path()

    def __enter__(self) -> LabgridLab:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def client_argv(self, *args: str) -> list[str]:
        return [labgrid_program("labgrid-client"), "-x", self.coordinator, *args]

    def client(self, *args: str, timeout: float = 30.0) -> str:
        """Run ``labgrid-client`` against this lab (as this process's login identity)."""
        env = {k: v for k, v in os.environ.items() if k not in ("LG_USERNAME", "LG_HOSTNAME")}
        done = subprocess.run(
            self.client_argv(*args),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise LabError(f"labgrid-client {' '.join(args)}: {done.stderr.strip()[-400:]}")
        return done.stdout

    def admin(self, rpc: str, **fields: object) -> None:
        """One request to the coordinator as the lab's admin, through labgrid's gRPC API
        (``rpc`` a method of its stub, ``fields`` its request's): what ``labgrid-client
        create``, ``add-match`` and ``set-tags`` send, without a client process (0.4 s of
        CPU each)."""
        import grpc
        from labgrid.remote.generated import labgrid_coordinator_pb2 as messages
        from labgrid.remote.generated.labgrid_coordinator_pb2_grpc import CoordinatorStub

        request = getattr(messages, f"{rpc}Request")(**fields)
        with grpc.insecure_channel(self.coordinator) as channel:
            try:
                getattr(CoordinatorStub(channel), rpc)(request, timeout=_READY_TIMEOUT_S)
            except grpc.RpcError as exc:
                why = exc.details() if isinstance(exc, grpc.Call) else exc
                raise LabError(f"labgrid coordinator {self.coordinator}: {rpc}: {why}") from None

    def _start(self) -> None:
        directory = self._directory = self._stack.enter_context(
            owned_directory("labgrid-lab-", cache_root() / "emulators")
        )
        firmware = build_firmware()
        port = self._port or free_port(COORDINATOR_HOST)
        self.coordinator = f"{COORDINATOR_HOST}:{port}"
        self._coordinator_argv = [
            "env",
            "-C",
            str(directory),
            labgrid_program("labgrid-coordinator"),
            "--listen",
            self.coordinator,
        ]
        self._stack.callback(lambda: self._coordinator_process and self._coordinator_process.stop())
        self._start_coordinator()
        wrapper_dir = ser2net_loopback.wrapper_folder(directory)
        files = self._files or directory
        files.mkdir(parents=True, exist_ok=True)
        self.known_hosts, self.client_key = files / "known_hosts", files / "id_ed25519"
        ensure_key(self.client_key, "labgrid lab client key")  # every SSH board accepts it
        for number, host in enumerate(self.hosts):
            self._start_exporter_of(number, host, firmware, wrapper_dir)
        self._stack.callback(self._stop_exporters)
        self._publish_ssh_files()
        self._wait_exported()
        self._add_places()

    def _start_exporter_of(self, number: int, host: str, firmware: Path, wrapper_dir: Path) -> None:
        """Host ``number``'s devices (a board, a phone, an SSH board as asked), its power
        switch, and its exporter, which exports them."""
        directory = self._directory
        letter = chr(ord("a") + number)
        board = EmulatedBoard(firmware, directory, f"board-{letter}")
        self._stack.callback(board.stop)
        exporter = f"exp-{letter}"
        phone = None
        if number < self._android_phones:
            server = PrivateAdbServer(directory / f"adb-server-{letter}")
            self._stack.enter_context(server)
            phone = EmulatedPhone(directory, f"phone-{letter}", host, server)
            self._stack.callback(phone.stop)
            self.android_places.append(AndroidPlace(f"android-{letter}", exporter, phone))
        powered: list[EmulatedBoard | EmulatedPhone | PoweredLinuxBoard] = [board]
        powered += [phone] if phone is not None else []
        if number < self._linux_boards:
            linux = self._start_linux_board(letter, host)
            self.linux_board_places.append(LinuxBoardPlace(f"boot-{letter}", exporter, linux))
            powered.append(linux)
        switch = PowerSwitch(host, powered)
        self._stack.callback(switch.stop)
        config = directory / f"{exporter}.yaml"
        text = (
            f"{GROUP}:\n"
            f"  RawSerialPort:\n    port: {board.pty}\n    speed: 115200\n"
            f"  NetworkPowerPort:\n    model: simplerest\n    host: '{switch.url}'\n"
            "    index: 0\n"
        )  # a Jinja2 template: no line may start with '#'
        if phone is not None:
            text += (
                f"{ANDROID_GROUP}:\n  NetworkPowerPort:\n    model: simplerest\n"
                f"    host: '{switch.url}'\n    index: 1\n"
            )
        if number < self._ssh_boards:
            text += self._start_ssh_board(letter, host, exporter)
        if number < self._linux_boards:
            linux_board = self.linux_board_places[-1].board.board
            console = ConsoleFeed(host, linux_board.console_log)
            self._stack.callback(console.stop)
            text += (
                f"{BOOT_GROUP}:\n  NetworkService:\n    address: {host}\n"
                f"    port: {linux_board.port}\n    username: {linux_board.user}\n"
                f"  NetworkPowerPort:\n    model: simplerest\n    host: '{switch.url}'\n"
                f"    index: {len(powered) - 1}\n"
                f"  NetworkSerialPort:\n    host: {host}\n    port: {console.port}\n"
                "    speed: 115200\n    protocol: raw\n"
            )
        config.write_text(text)
        env = {
            **os.environ,
            "PATH": f"{wrapper_dir}{os.pathsep}{os.environ['PATH']}",
            "ET_SER2NET_BIND": host,
            "PYTHONPATH": str(shipped.import_root()),
        }
        argv = [
            labgrid_program("labgrid-exporter"),
            "-c",
            self.coordinator,
            "-n",
            exporter,
            "--hostname",
            host,
            str(config),
        ]
        self._exporters[exporter] = (argv, env, directory / f"{exporter}.log")
        self._start_exporter(exporter)
        self.places.append(LabPlace(f"lab-{letter}", exporter, host, board))

    def _start_ssh_board(self, letter: str, host: str, exporter: str) -> str:
        """An SSH board listening on ``host``; its exporter config's lines."""
        sshd = SshEmulator(
            self._directory / f"sshd-{letter}",
            alias=f"ssh-{letter}",
            isolation=Isolation.LOOPBACK,
            listen_host=host,
        )
        self._stack.enter_context(sshd)
        self.ssh_places.append(SshPlace(f"ssh-{letter}", exporter, sshd))
        return (
            f"{SSH_GROUP}:\n  NetworkService:\n    address: {host}\n"
            f"    port: {sshd.port}\n    username: {sshd.user}\n"
        )

    def _start_linux_board(self, letter: str, host: str) -> PoweredLinuxBoard:
        """A Linux board that boots, its SSH on ``host``, accepting the lab's client key."""
        from harness.emulators.linux import LinuxEmulator

        emulator = LinuxEmulator(
            self._directory / f"linux-{letter}",
            alias=f"boot-{letter}",
            listen_host=host,
            authorized_key=self.client_key.with_suffix(".pub"),
            boot_timeout=int(_READY_TIMEOUT_S),
        )
        self._stack.callback(emulator.stop)  # if its first boot fails
        board = PoweredLinuxBoard(emulator)
        self._stack.callback(board.stop)
        return board

    def cut_power(self, name: str) -> None:
        """Switch a Linux board place's power off, as a lab's power failure would: the
        board is dark until someone switches it on (a harness, through the place)."""
        place = next(p for p in self.linux_board_places if p.name == name)
        place.board.power(False)

    def _add_places(self) -> None:
        """Each exported board, SSH board and phone a place of its own, tagged."""
        for name, exporter, group, tags in (
            *((p.name, p.exporter, GROUP, TAGS) for p in self.places),
            *((p.name, p.exporter, SSH_GROUP, SSH_TAGS) for p in self.ssh_places),
            *((p.name, p.exporter, ANDROID_GROUP, p.tags) for p in self.android_places),
            *((p.name, p.exporter, BOOT_GROUP, BOOT_TAGS) for p in self.linux_board_places),
        ):
            self.admin("AddPlace", name=name)
            self.admin("AddPlaceMatch", placename=name, pattern=f"{exporter}/{group}/*")
            self.admin("SetPlaceTags", placename=name, tags=tags)

    def _start_coordinator(self) -> None:
        self._coordinator_process = ManagedProcess(
            self._coordinator_argv, name="labgrid-coordinator"
        )
        host, port = self.coordinator.rsplit(":", 1)
        wait_listening(host, int(port), self._coordinator_process)

    def _start_exporter(self, exporter: str) -> None:
        argv, env, log = self._exporters[exporter]
        self._exporter_processes[exporter] = ManagedProcess(
            argv, name=f"labgrid-{exporter}", env=env, log=log
        )

    def _stop_exporters(self) -> None:
        for process in self._exporter_processes.values():
            process.stop()

    def stop_exporter(self, exporter: str) -> None:
        """End one exporter, as a host that goes away (its places' resources go with it)."""
        self._exporter_processes[exporter].stop()

    def start_exporter(self, exporter: str) -> None:
        """Start a stopped exporter again; once its resources are back."""
        self._start_exporter(exporter)
        self._wait_exported()

    def restart_exporter(self, exporter: str) -> None:
        """Stop one exporter and start it again, as a lab's service manager would (its
        ser2net ends with it: a serial port comes back on a new network port)."""
        self.stop_exporter(exporter)
        self.start_exporter(exporter)

    def kill_ssh_board(self, name: str) -> None:
        """SIGKILL an SSH place's sshd and every session it serves, as a board that dies."""
        self._ssh_place(name)[1].board.kill()

    def revive_ssh_board(self, name: str) -> None:
        """Start a killed SSH place's sshd again, at the address and port its exporter
        publishes, with its host key."""
        index, place = self._ssh_place(name)
        old = place.board
        old.stop()
        board = SshEmulator(
            old.directory,
            alias=old.alias,
            isolation=Isolation.LOOPBACK,
            listen_host=old.host,
            port=old.port,
        )
        self._stack.enter_context(board)
        self._authorize_lab_key(board)
        self.ssh_places[index] = replace(place, board=board)

    def _ssh_place(self, name: str) -> tuple[int, SshPlace]:
        return next((i, p) for i, p in enumerate(self.ssh_places) if p.name == name)

    def restart_coordinator(self, saved: bool = False) -> None:
        """SIGKILL the coordinator and start it again on its address, with its places
        file (labgrid forgets acquisitions and reservations in a restart); exporters that
        ended with it are started again, as a lab's service manager would. ``saved``: the
        places were not changed since :meth:`save_places` (the restart is at once)."""
        assert self._coordinator_process is not None
        if not saved:
            self.save_places()
        self._coordinator_process.kill()
        self._coordinator_process.stop()
        self._start_coordinator()
        for exporter, process in self._exporter_processes.items():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(_READY_TIMEOUT_S)  # an exporter ends when its coordinator does
            process.stop()
            self._start_exporter(exporter)
        self._wait_exported()

    def save_places(self) -> None:
        """Until the coordinator saved its places as they are now."""
        # The coordinator saves its places up to 15 s after a change, so a kill before that
        # would bring back an older state (a tag a test has since put back). A change made
        # now (a tag set to the value it has) asks for a save of the present state.
        saved = self._directory / "places.yaml"
        before = saved.stat().st_mtime_ns if saved.exists() else 0
        self.admin("SetPlaceTags", placename=self.places[0].name, tags={"kind": TAGS["kind"]})
        deadline = time.monotonic() + _READY_TIMEOUT_S
        names = [p.name for p in self.places] + [p.name for p in self.ssh_places]
        names += [p.name for p in self.android_places]
        names += [p.name for p in self.linux_board_places]
        while not (
            saved.exists()
            and saved.stat().st_mtime_ns > before
            and all(f"{name}:" in saved.read_text() for name in names)
        ):
            if time.monotonic() > deadline:
                raise LabError(f"the coordinator did not save its places in {saved}")
            time.sleep(0.2)  # polling a file the coordinator writes in its own time

    def _publish_ssh_files(self) -> None:
        """The SSH boards' host keys in one known_hosts (what a lab publishes for its
        devices) and the client key they all accept, copied beside it."""
        boards: list[SshBoardFiles] = [p.board for p in self.ssh_places]
        boards += [p.board.board for p in self.linux_board_places]
        lines = [f"{board.known_hosts_name} {board.host_public_key}\n" for board in boards]
        self.known_hosts.write_text("".join(lines))
        for place in self.ssh_places:
            self._authorize_lab_key(place.board)

    def _authorize_lab_key(self, board: SshEmulator) -> None:
        """One key for the lab: every board accepts it."""
        board.authorized_keys_file.write_text(  # type: ignore[union-attr]
            self.client_key.with_suffix(".pub").read_text()
        )

    def _wait_exported(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        wanted = {f"{place.exporter}/{GROUP}/NetworkSerialPort" for place in self.places}
        wanted |= {f"{place.exporter}/{SSH_GROUP}/NetworkService" for place in self.ssh_places}
        wanted |= {
            f"{place.exporter}/{ANDROID_GROUP}/NetworkPowerPort" for place in self.android_places
        }
        wanted |= {
            f"{place.exporter}/{BOOT_GROUP}/NetworkService" for place in self.linux_board_places
        }
        while True:
            listed = self.client("resources")
            if all(name in listed for name in wanted):
                return
            if time.monotonic() > deadline:
                raise LabError(
                    f"exporters did not register within {_READY_TIMEOUT_S:g} s; "
                    f"resources: {listed[-400:]}"
                )
            time.sleep(0.2)  # polling the coordinator: it has no "wait for exporter" call


def wait_listening(host: str, port: int, process: ManagedProcess) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LabError(f"{process.name} exited:\n{process.stderr_tail()}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
            return
        time.sleep(0.05)  # polling a port that is about to open
    raise LabError(f"{process.name} did not listen on {host}:{port}:\n{process.stderr_tail()}")


@contextlib.contextmanager
def running_lab(
    places: int = 2,
    port: int | None = None,
    ssh_boards: int = 0,
    files: Path | None = None,
    android_phones: int = 0,
    linux_boards: int = 0,
) -> Iterator[LabgridLab]:
    hosts = tuple(f"127.0.0.{2 + n}" for n in range(places))
    with LabgridLab(hosts, port, ssh_boards, files, android_phones, linux_boards) as lab:
        yield lab
