"""Device kind ``ssh``: a Linux board over OpenSSH; emulators ``ssh-emu`` (sshd on this
host), ``linux-emu`` (an arm64 board that boots under QEMU) and ``linux-kvm`` (its x86_64
twin, under QEMU with KVM)."""

from __future__ import annotations

from pathlib import Path

from harness.devices.acquired_place import LabResourceError, LabResources
from harness.devices.base import Emulator, OpenContext
from harness.devices.host_tools import HostTool, agent_tools, check_kvm
from harness.devices.hosted import HostedDevice, emulator_home, with_settings
from harness.profiles.device_profile import DeviceProfile
from harness.profiles.kinds import DeviceKind, LabAddress, Settings
from harness.profiles.validator import parse_settings, refuse
from harness.transport.ssh import SshConfigError, SshSettings, SshTransport, resolve_route

# The transport fields of an ssh profile; their rules are SshSettings's own (it checks
# host, port, user, proxy_jump, keepalive_interval and host_key on construction).
FIELDS = dict.fromkeys(
    (
        "host",
        "port",
        "user",
        "identity_file",
        "ssh_config",
        "known_hosts",
        "host_key",
        "proxy_jump",
        "use_agent",
        "keepalive_interval",
    )
)


def ssh_settings(profile: DeviceProfile) -> SshSettings:
    """The profile's transport fields, checked, with the route through the ssh config
    resolved once to check what the config adds."""
    where = profile.where("transport")
    # A config the profile names is profile data; the sshd emulator's is the
    # harness's own (open_device refuses a profile that sets it for an emulator).
    trusted = "ssh_config" not in profile.settings or profile.emulator is not None
    try:
        settings = parse_settings(
            SshSettings,
            profile.settings,
            where,
            fields=FIELDS,
            base=profile.path.parent if profile.path else Path.cwd(),
            required={"host": "required, a host or alias"},
            work_dir=profile.work_dir,
            work_dir_where=profile.where("work_dir"),
            connect_timeout=profile.timeouts.connect,
            config_commands=trusted,
        )
        resolve_route(settings)
    except SshConfigError as exc:
        raise refuse(where, exc.field, str(exc)) from None
    return settings


def check_settings(profile: DeviceProfile) -> None:
    ssh_settings(profile)


def lab_settings(profile: DeviceProfile, resources: LabResources, place: str) -> dict[str, object]:
    """Log in where the place's ``NetworkService`` says (checked as it was read)."""
    service = resources.service
    if service is None:
        raise LabResourceError(
            f"labgrid place {place!r} has no NetworkService for {profile.name}'s SSH transport"
        )
    return {"host": service.host, "port": service.port, "user": service.user}


# What ssh-emu runs on this machine: the real OpenSSH server, in namespaces of its own.
_SSH_EMU = (
    HostTool("/usr/sbin/sshd", "openssh-server", "is the emulated board's sshd"),
    HostTool("ssh-keygen", "openssh-client", "makes the emulated board's keys"),
    HostTool("useradd", "passwd", "makes the emulated board's user"),
    HostTool(
        "ip", "iproute2", "gives the emulated board a network namespace", "listens on loopback"
    ),
    HostTool("socat", "socat", "connects to the emulated board's namespace", "listens on loopback"),
)

# The boards that boot (harness.emulators.linux_arch.BOARDS names the same two).
BOOTED_BOARDS = ("linux-emu", "linux-kvm")
# What such a board runs on this machine besides its QEMU: what makes its keys and flash.
_BOOTED_BOARD = (
    HostTool("ssh-keygen", "openssh-client", "makes the emulated board's keys"),
    HostTool("mke2fs", "e2fsprogs", "makes the board's flash image"),
    HostTool("dpkg-deb", "dpkg", "unpacks the board's Debian packages"),
)


def host_tools(profile: DeviceProfile) -> tuple[HostTool, ...]:
    """A board's agent is built here: for arm64 under ssh-emu, which runs it here too, and
    for the board's ABI under linux-emu and linux-kvm, whose booted kernel runs it."""
    if profile.emulator in BOOTED_BOARDS:
        from harness.emulators.linux_arch import board_arch

        arch = board_arch(profile.emulator)
        qemu = HostTool(arch.qemu, arch.qemu_package, f"emulates the {arch.debian} board")
        return (*agent_tools(profile, runs_here=False), qemu, *_BOOTED_BOARD)
    emulated = profile.emulator is not None
    return agent_tools(profile, runs_here=emulated, arm64=emulated) + (_SSH_EMU if emulated else ())


def open_device(profile: DeviceProfile, context: OpenContext) -> HostedDevice:
    resources = context.resources
    emulator: Emulator | None = None
    if profile.emulator in BOOTED_BOARDS:
        from harness.emulators.linux import LinuxEmulator
        from harness.emulators.linux_arch import board_arch

        arch = board_arch(profile.emulator)
        if arch.needs_kvm:
            check_kvm(profile)
        home = emulator_home(profile, resources) / "board"
        emulator = resources.enter_context(
            LinuxEmulator(home, arch=arch, boot_timeout=int(profile.timeouts.connect))
        )
    elif profile.emulator is not None:
        from harness.emulators.ssh import SshEmulator

        emulator = resources.enter_context(SshEmulator(emulator_home(profile, resources) / "sshd"))
    if emulator is not None:
        profile = with_settings(profile, **emulator.settings)
    return HostedDevice(profile, SshTransport(ssh_settings(profile)), resources, emulator)


def lock_key(settings: Settings) -> str:
    """One board, whichever profile names it: its login and address."""
    return f"ssh:{settings.get('user', '')}@{settings.get('host')}:{settings.get('port', 22)}"


KIND = DeviceKind(
    name="ssh",
    settings=SshSettings,
    emulator="ssh-emu",
    more_emulators=BOOTED_BOARDS,
    emulator_fields=("host", "ssh_config"),
    lock_key=lock_key,
    awaits_boot=True,
    lab=LabAddress(
        fields=("host", "port", "user"),
        placeholder=(("host", "127.0.0.1"), ("port", 22), ("user", "lab")),
    ),
)
