"""Emulated devices the harness can test against when no hardware is attached.

- :mod:`harness.emulators.adbd` — ``adb-emu``, a device-side ADB daemon that the real
  ``adb`` client talks to; :class:`harness.emulators.adb_emulator.AdbEmulator` starts it.
"""
