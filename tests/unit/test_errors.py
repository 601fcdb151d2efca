"""One error root: every exception the harness defines is a HarnessError of exactly one branch."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil

import pytest

import harness
from harness.errors import CheckFailure, HarnessError, InfrastructureError, UsageError

BRANCHES = (UsageError, InfrastructureError, CheckFailure)


def harness_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of ``harness`` (warnings are not errors)."""
    found = []
    for module_info in pkgutil.walk_packages(harness.__path__, "harness."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and not issubclass(value, Warning)
                and value.__module__ == module.__name__
                and value not in (HarnessError, *BRANCHES)
            ):
                found.append(value)
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


EXCEPTIONS = harness_exceptions()


def test_the_walk_finds_the_harness_exceptions():
    names = {cls.__name__ for cls in EXCEPTIONS}
    assert {"ProfileError", "TransportError", "SdkError", "DeliveryMismatch"} <= names
    assert len(EXCEPTIONS) > 80


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_harness_exception_is_a_harness_error_of_exactly_one_branch(cls):
    assert issubclass(cls, HarnessError), f"{cls.__module__}.{cls.__name__}: {cls.__mro__}"
    branches = [branch.__name__ for branch in BRANCHES if issubclass(cls, branch)]
    assert len(branches) == 1, f"{cls.__module__}.{cls.__name__}: {branches}"


@pytest.mark.parametrize(
    ("name", "branch"),
    [
        ("harness.profiles.validator.ProfileError", UsageError),
        ("harness.codec.mapfile.MapFileError", UsageError),
        ("harness.data.options.MapValidationError", UsageError),
        ("harness.runtime.wheel_sdk.SdkError", UsageError),
        ("harness.programs.contents.ProgramError", UsageError),
        ("harness.transport.base.TransportError", InfrastructureError),
        ("harness.transport.base.DeviceUnavailable", InfrastructureError),
        ("harness.farm.deadline.RunTimeExpired", InfrastructureError),
        ("harness.emulators.ssh.SshEmulatorError", InfrastructureError),
        ("harness.check.verdict.DeliveryMismatch", CheckFailure),
    ],
)
def test_each_kind_of_trouble_is_in_its_branch(name, branch):
    module, _, class_name = name.rpartition(".")
    assert issubclass(getattr(importlib.import_module(module), class_name), branch)


def test_builtin_bases_kept_for_callers_that_catch_them():
    from harness.check.verdict import DeliveryMismatch
    from harness.profiles.validator import ProfileError
    from harness.untrusted.value_rules import ValueRuleError

    assert issubclass(ProfileError, ValueError) and issubclass(ValueRuleError, ValueError)
    assert issubclass(DeliveryMismatch, AssertionError)


def test_the_infra_branch_is_what_the_plugin_reports_as_infrastructure():
    from harness.emulators.ssh import SshEmulatorError
    from harness.results.infra import infrastructure_error

    trouble = SshEmulatorError("ssh-emu did not start")
    assert infrastructure_error(trouble) is trouble
    from harness.profiles.validator import ProfileError

    assert infrastructure_error(ProfileError("x.yaml: name: bad")) is None


@pytest.mark.parametrize(
    "error",
    [
        "harness.profiles.validator.ProfileError",
        "harness.transport.base.DeviceUnavailable",
        "harness.emulators.ssh.SshEmulatorError",
        "harness.cli.bench.BenchmarkError",
    ],
)
def test_the_cli_prints_any_harness_error_as_one_line_with_exit_2(error, monkeypatch, capsys):
    cli = importlib.import_module("harness.cli.main")

    module, _, class_name = error.rpartition(".")
    cls = getattr(importlib.import_module(module), class_name)

    def fail(_args: argparse.Namespace) -> int:
        raise cls("devices/x.yaml: something to change")

    monkeypatch.setattr(cli, "_cmd_devices", fail)
    assert cli.main(["devices"]) == 2
    assert capsys.readouterr().err == "et-harness devices: devices/x.yaml: something to change\n"


def test_the_cli_keeps_the_traceback_of_a_bug(monkeypatch):
    cli = importlib.import_module("harness.cli.main")

    def fail(_args: argparse.Namespace) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(cli, "_cmd_devices", fail)
    with pytest.raises(KeyError):
        cli.main(["devices"])
