"""linux-emu's labgrid strategy: off -> shell -> ssh, through labgrid's own drivers.

``off``: the board's power is off (``QEMUDriver.off``, which ends QEMU at once: a cut).
``on``: powered on (QEMU started and connected to its serial console), booting.
``shell``: booted, and logged in as root on the serial console (``ShellDriver``, which
waits for busybox's getty's login prompt). ``ssh``: the shell started the
board's OpenSSH server, which answers on the forwarded port. A ``reboot`` from the
``ssh`` state reboots the kernel from the console shell and comes back to ``ssh``;
``await_reboot`` does the same for a reboot asked otherwise (the agent's REBOOT).

labgrid is the ``[lab]`` extra: the class is made, and registered with labgrid's
factory, at the first :func:`strategy_class` call (the emulator's first power-on), so
that this module imports without labgrid.
"""

from __future__ import annotations

import enum
import functools
from typing import Any, ClassVar

SSHD = "/usr/sbin/sshd -E /run/et/sshd.log"
RESTARTING = "reboot: Restarting system"  # printed by the kernel, quiet or not
REBOOT_TIMEOUT = 30.0
# QEMU connects to its serial socket as it starts; labgrid's QEMUDriver.on waits for that
# without a bound, so a QEMU killed first (a power cut as it starts) would hang the boot.
SERIAL_CONNECT_TIMEOUT = 30.0


class Status(enum.Enum):
    unknown = 0
    off = 1
    on = 2
    shell = 3
    ssh = 4


@functools.cache
def strategy_class() -> type:
    """``LinuxBoardStrategy``, registered with labgrid's target factory (once)."""
    import attr
    from labgrid.factory import target_factory
    from labgrid.step import step
    from labgrid.strategy import Strategy, StrategyError

    @target_factory.reg_driver
    @attr.s(eq=False)
    class LinuxBoardStrategy(Strategy):
        """Brings a QEMU board to off, on (booting), a console shell, or SSH (see the module)."""

        bindings: ClassVar[dict[str, str]] = {
            "power": "PowerProtocol",
            "console": "ConsoleProtocol",
            "shell": "ShellDriver",
        }

        status = attr.ib(default=Status.unknown)

        @step(args=["status"])
        def transition(self, status: Status | str, *, step: Any) -> None:
            status = status if isinstance(status, Status) else Status[status]
            if status is Status.unknown:
                raise StrategyError(f"can not transition to {status}")
            if status is self.status:
                return
            if status is Status.off:
                self.target.deactivate(self.shell)
                self.target.activate(self.power)
                self.power.off()
            elif status is Status.on:
                self.transition(Status.off)
                self.target.activate(self.console)
                self._power_on()
            elif status is Status.shell:
                self.transition(Status.on)
                self.target.activate(self.shell)
            elif status is Status.ssh:
                self.transition(Status.shell)
                self.shell.run_check(SSHD)
            self.status = status

        def reboot(self) -> None:
            """A real reboot of the kernel (busybox ``reboot`` on the console shell), then
            :meth:`await_reboot`."""
            self._require_ssh()
            self.console.sendline("reboot")
            self.await_reboot()

        def await_reboot(self) -> None:
            """The kernel was asked to reboot (from the console, or by the agent's REBOOT):
            wait for its last words, log in on the console again and start OpenSSH."""
            self._require_ssh()
            self.console.expect(RESTARTING, timeout=REBOOT_TIMEOUT)
            self.target.deactivate(self.shell)  # its next activation waits for the login prompt
            self.target.activate(self.shell)
            self.shell.run_check(SSHD)

        def _power_on(self) -> None:
            """``power.on``, its wait for QEMU's serial connection bounded by
            :data:`SERIAL_CONNECT_TIMEOUT` (the driver's listening socket, made as it was
            activated); a QEMU that did not connect in time is killed."""
            self.console._socket.settimeout(SERIAL_CONNECT_TIMEOUT)
            try:
                self.power.on()
            except TimeoutError:
                child = self.console._child
                if child is not None and child.poll() is None:
                    child.kill()
                    child.wait()
                raise StrategyError(
                    f"QEMU did not connect to its serial console within "
                    f"{SERIAL_CONNECT_TIMEOUT:g} s: it ended or hung as it started"
                ) from None

        def _require_ssh(self) -> None:
            if self.status is not Status.ssh:
                raise StrategyError(f"can only reboot a board in state ssh, not {self.status}")

        def forget_power(self) -> None:
            """The board's QEMU was killed from outside: mark it off without asking it (the
            driver's QMP monitor went with it)."""
            self.target.deactivate(self.shell)
            self.power.status = 0
            self.status = Status.off

    return LinuxBoardStrategy
