"""A path under ``~user`` of a user this machine does not have, wherever the harness takes
a path (environment, options, profiles: the last in tests/unit/test_hostile_profiles.py): one
line naming where it came from, never pathlib's RuntimeError as a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.history.target import checked_target, driver_of
from harness.lifecycle.cache import cache_root, data_root
from harness.runtime.choice import parse_runtimes
from harness.runtime.install_prefix import prefix_from_environment
from harness.runtime.source_tree import runtime_from_environment
from harness.runtime.wheel_sdk import SdkError
from harness.untrusted.trust import listed_by_user

NO_USER = "~et-no-such-user/place"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "variable, read, error",
    [
        ("ET_HARNESS_CACHE", cache_root, UsageError),
        ("ET_HARNESS_DATA", data_root, UsageError),
        ("ET_HARNESS_SDK", prefix_from_environment, SdkError),
        ("ET_HARNESS_RUNTIME", runtime_from_environment, SdkError),
        ("ET_HARNESS_HISTORY", lambda: checked_target(None), UsageError),
    ],
)
def test_an_environment_path_of_no_user_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    read: Callable[[], object],
    error: type[Exception],
) -> None:
    monkeypatch.setenv(variable, NO_USER)
    with pytest.raises(error) as refused:
        read()
    assert str(refused.value).startswith(f"{variable}: '{NO_USER}': "), refused.value
    assert "the user named after ~ has no home directory" in str(refused.value)


def test_a_runtime_option_of_no_user_is_refused() -> None:
    with pytest.raises(UsageError, match=f"--runtime '{NO_USER}@main': .*after ~ has no home"):
        parse_runtimes(f"1.5.1,{NO_USER}@main")


def test_a_history_file_of_no_user_is_refused_and_a_trust_entry_trusts_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="after ~ has no home directory"):
        driver_of(NO_USER)
    with pytest.raises(UsageError, match=f"^--history: '{NO_USER}': .*after ~ has no home"):
        checked_target(NO_USER)
    monkeypatch.setenv("ET_TEST_TRUSTED", os.pathsep.join([NO_USER, str(tmp_path)]))
    assert listed_by_user(tmp_path / "board.yaml", "ET_TEST_TRUSTED")
    assert not listed_by_user(Path("/elsewhere.yaml"), "ET_TEST_TRUSTED")


def test_pytest_says_it_in_one_line_before_any_test() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/test_dispatch.py", "--device", "host",
         "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, env={**os.environ, "ET_HARNESS_CACHE": NO_USER},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip() == (
        f"ERROR: ET_HARNESS_CACHE: '{NO_USER}': the user named after ~ has no home directory "
        "on this machine; write the path out in full"
    ), done.stderr
