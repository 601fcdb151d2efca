"""The boards that boot, by architecture: what differs between ``linux-emu`` (Debian's
arm64 kernel under ``qemu-system-aarch64 -M virt``, TCG) and ``linux-kvm`` (Debian's
amd64 kernel under ``qemu-system-x86_64 -M q35``, its CPU virtualized by KVM).

Everything else (the image's build, the board's own files, labgrid's driver and the
strategy, the keys, the power cuts) is one code path for both: :mod:`harness.emulators.linux`
and :mod:`harness.emulators.linux_image` take a :class:`BoardArch`. See docs/linux-emu.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

# The kernel's modules the initramfs loads on every board, in order, after the bus's own.
_DISK_AND_NET = (
    "drivers/block/virtio_blk", "lib/crc16", "fs/mbcache", "fs/jbd2/jbd2",
    "crypto/crc32c_generic", "fs/ext4/ext4", "net/core/failover", "drivers/net/net_failover",
    "drivers/net/virtio_net", "drivers/char/hw_random/virtio-rng",
)  # fmt: skip


@dataclass(frozen=True)
class BoardArch:
    """One architecture's board: its QEMU, machine and console, and its Debian packages."""

    emulator: str  # the profile's emulator; also the board's host name and SSH alias
    debian: str  # Debian's name of the architecture: the image's cache entry, its lock
    triplet: str  # the multiarch folder, usr/lib/<triplet>
    lock: str  # the lock's file name in agent/
    qemu: str  # the QEMU system emulator
    qemu_package: str  # the Debian package that has it
    machine: str
    cpu: str
    accel: tuple[str, ...]  # QEMU's accelerator arguments (none: TCG)
    console: str  # the serial console's device, as the kernel names it
    virtio: str  # the virtio devices' bus suffix: "device" (MMIO) or "pci"
    kernel_file: str  # the kernel's file name in the image
    modules: tuple[str, ...]  # the initramfs's modules, in the order it loads them

    @property
    def module_names(self) -> str:
        """The modules' names as the initramfs's ``init`` loads them, space-separated."""
        return " ".join(PurePosixPath(module).name for module in self.modules)

    @property
    def needs_kvm(self) -> bool:
        return "kvm" in self.accel


ARM64 = BoardArch(
    emulator="linux-emu",
    debian="arm64",
    triplet="aarch64-linux-gnu",
    lock="linux-board.lock",
    qemu="qemu-system-aarch64",
    qemu_package="qemu-system-arm",
    machine="virt",
    cpu="cortex-a57",
    accel=(),
    console="ttyAMA0",
    virtio="device",
    kernel_file="Image",
    modules=("drivers/virtio/virtio_mmio", *_DISK_AND_NET),
)

AMD64 = BoardArch(
    emulator="linux-kvm",
    debian="amd64",
    triplet="x86_64-linux-gnu",
    lock="linux-board-amd64.lock",
    qemu="qemu-system-x86_64",
    qemu_package="qemu-system-x86",
    machine="q35",
    # The host's CPU, without the IA32_ARCH_CAPABILITIES MSR: QEMU 7.2 aborts setting it
    # under a nested KVM on AMD hosts ("failed to set MSR 0x10a"); the guest only loses
    # the CPU's report of which speculation flaws it lacks.
    cpu="host,-arch-capabilities",
    accel=("-accel", "kvm"),
    console="ttyS0",
    virtio="pci",
    kernel_file="vmlinuz",
    modules=(
        "drivers/virtio/virtio_ring", "drivers/virtio/virtio",
        "drivers/virtio/virtio_pci_modern_dev", "drivers/virtio/virtio_pci_legacy_dev",
        "drivers/virtio/virtio_pci", *_DISK_AND_NET,
    ),
)  # fmt: skip

BOARDS = {arch.emulator: arch for arch in (ARM64, AMD64)}


def board_arch(emulator: str) -> BoardArch:
    """The board of emulator ``emulator`` (``linux-emu``, ``linux-kvm``)."""
    return BOARDS[emulator]
