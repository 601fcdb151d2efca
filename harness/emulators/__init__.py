"""Emulated devices the harness can test against when no hardware is attached.

- :mod:`harness.emulators.adb.daemon` — ``adb-emu``, a device-side ADB daemon that the real
  ``adb`` client talks to; :class:`harness.emulators.adb.launcher.AdbEmulator` starts it.
- :mod:`harness.emulators.ssh` — ``ssh-emu``, the real OpenSSH server in a network
  namespace of its own.
- :mod:`harness.emulators.mcu` — ``mcu-emu`` and ``mcu-m55-emu``, QEMU's mps2-an385
  (Cortex-M3) and mps3-an547 (Cortex-M55) running the agent firmware built for each
  (:mod:`harness.profiles.mcu_boards`); :mod:`harness.emulators.fault_relay` corrupts, drops and
  duplicates the bytes between it and the host.

Each runs as a :class:`harness.lifecycle.process.ManagedProcess`, so it stops with the
harness however the harness ends (docs/lifecycle.md).
"""
