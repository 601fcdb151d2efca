"""The one root of the harness's exceptions and its three branches.

Every exception the harness defines derives from :class:`HarnessError` through exactly
one branch (``tests/unit/test_errors.py`` walks them all):

- :class:`UsageError`: what the user gave or set up must change, and the message says
  how: a profile (``config.settings.ProfileError`` and the value and file rules it uses),
  a map (``codec.mapfile.MapFileError``, ``model.options.MapValidationError``, the wire
  limits), the SDK and the builds made with it (``agent.sdk.SdkError``,
  ``agent.build.AgentBuildError``), a program (``agent.program_contents.ProgramError``),
  a run's options and its history store.
- :class:`InfrastructureError`: device trouble (``transport.base.TransportError`` and
  what derives from it: a device that cannot be reached, a lost link, a timeout, an
  emulator that did not start) and trouble of the farm around it (the run's time is
  up). The pytest plugin reports it as its own outcome, never as a pass or a failure.
- :class:`CheckFailure`: the runtime under test did not do what was asked (a delivery
  that differs, a verdict never examined, a race reported): the test fails.

The command line prints any of them as one line (exit 2); anything else is a bug and
keeps its traceback. This module imports nothing, so every layer may use it.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Something the harness refuses or cannot do; the message says what to do."""


class UsageError(HarnessError):
    """What the user gave or set up (profile, map, SDK, program, options) must change."""


class InfrastructureError(HarnessError):
    """Device or farm trouble, not a verdict on the code under test.

    ``kept`` holds files that show what failed but may be gone by the time the error is
    reported (an emulator's console log up to a failed boot: its directory goes as the
    device closes), each as ``(its path, its content)``: a run keeps them as the failing
    test's artifacts, and names the kept copy wherever the message named the path.
    """

    kept: tuple[tuple[str, bytes], ...] = ()


class CheckFailure(HarnessError):
    """The runtime under test did not do what was asked: the test fails."""
