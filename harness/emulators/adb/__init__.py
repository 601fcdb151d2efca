"""adb-emu: an emulated Android device the real ``adb`` client talks to (docs/adb-emu.md).

- :mod:`.daemon` — the device-side ADB daemon (``python -m harness.emulators.adb.daemon``),
  over :mod:`.protocol`, :mod:`.connection`, :mod:`.auth`, :mod:`.shell`, :mod:`.sync`,
  :mod:`.properties` and :mod:`.device_root`;
- :mod:`.launcher` — :class:`AdbEmulator`, which starts it as a child process;
  :mod:`.server` — a private adb server for it; :mod:`.phone` — both as one emulated
  phone, which the adb device kind starts and restarts whole.
"""

from harness.emulators.adb.launcher import AdbEmulator

__all__ = ["AdbEmulator"]
