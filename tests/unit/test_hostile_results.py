"""Results directories from other hosts (a nightly's artifacts) caught up into the history:
read within bounds, every field checked, each refusal one line naming the file and field."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli.main import main as cli_main
from harness.results.directory import MAX_RESULTS_BYTES, read_results
from harness.results.merge import merge

RUN = {"run": "nightly", "host": "farm-1", "devices": ["host"], "started": 1.0e9}
RESULT = {"nodeid": "suites/test_a.py::test_b[host]", "device": "host", "outcome": "passed"}


def results_dir(tmp_path: Path, run: object = RUN, lines: tuple[object, ...] = ()) -> Path:
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / "run.json").write_text(json.dumps(run))
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (directory / "results.jsonl").write_text(text)
    return directory


def catch_up(tmp_path: Path, directory: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The one-line error ``et-harness history --catch-up`` gives for ``directory``."""
    store = str(tmp_path / "h.sqlite")
    assert cli_main(["history", "--history", store, "--catch-up", str(directory)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "run, expected",
    [
        ({**RUN, "exit_status": 10**30}, "'exit_status' must be an integer that fits 64 bits"),
        ({**RUN, "exit_status": True}, "'exit_status' must be an integer"),
        ({**RUN, "started": float("nan")}, "'started' must be a finite number"),
        ({**RUN, "host": ["farm"]}, "'host' must be a string; got ['farm']"),
        ({**RUN, "devices": [{"x": 1}]}, "'devices' must be a list of strings"),
        ({k: v for k, v in RUN.items() if k != "run"}, "'run' is missing"),
        ({**RUN, "host": "farm\udfff"}, "holds a lone surrogate (an escape"),
        ([RUN], "the file is not a JSON object"),
    ],
)
def test_a_run_description_field_of_the_wrong_type_is_named(tmp_path, capsys, run, expected):
    directory = results_dir(tmp_path, run)
    err = catch_up(tmp_path, directory, capsys)
    assert f"{directory / 'run.json'}: not a run description ({expected}" in err, err


@pytest.mark.parametrize(
    "line, expected",
    [
        ({**RESULT, "nodeid": {"a": 1}}, "'nodeid' must be a string"),
        ({**RESULT, "outcome": "won"}, "'outcome' must be one of passed, failed"),
        ({**RESULT, "duration": 1e300}, "'duration' must be a finite number below 2**63"),
        ({**RESULT, "duration": 10**400}, "'duration' must be a finite number below 2**63"),
        ({**RESULT, "facts": {"abi": 1}}, "'facts' must be an object of strings"),
        ({**RESULT, "sections": [["a"]]}, "'sections' must be a list of [string, str] pairs"),
        ({**RESULT, "infra": "lost"}, "'infra' is not a JSON object"),
        ({**RESULT, "nodeid": "t\ud800"}, "holds a lone surrogate (an escape \\ud800..\\udfff"),
        ({**RESULT, "verdicts": [{"action": "load", "ok": 1}]}, "'ok' must be true or false"),
        (
            {**RESULT, "options": [{"backend": "B", "key": "k", "observed": "yes"}]},
            "'observed' must be true or false; got 'yes'",
        ),
        # the report links artifacts: a URL would run in the reader's browser
        (
            {**RESULT, "artifacts": ["javascript:alert(1)"]},
            "'artifacts' holds 'javascript:alert(1)', not a path relative",
        ),
    ],
)
def test_a_result_field_of_the_wrong_type_is_named_with_its_line(tmp_path, capsys, line, expected):
    directory = results_dir(tmp_path, lines=(RESULT, line, RESULT))
    err = catch_up(tmp_path, directory, capsys)
    assert f"{directory / 'results.jsonl'}:2: not a test result: {expected}" in err, err


@pytest.mark.parametrize("name", ["run.json", "results.jsonl"])
def test_a_file_that_is_a_device_or_a_fifo_is_refused_unread(tmp_path, capsys, name):
    directory = results_dir(tmp_path, lines=(RESULT,))
    (directory / name).unlink()
    (directory / name).symlink_to("/dev/zero")
    assert "a character device, not a regular file" in catch_up(tmp_path, directory, capsys)
    (directory / name).unlink()
    os.mkfifo(directory / name)  # nobody writes: a blocking read would wait for ever
    assert "a FIFO, not a regular file" in catch_up(tmp_path, directory, capsys)


def test_a_results_file_over_the_bound_is_refused_by_its_size(tmp_path, capsys):
    directory = results_dir(tmp_path)
    with open(directory / "results.jsonl", "wb") as sparse:
        sparse.truncate(MAX_RESULTS_BYTES + 1)
    err = catch_up(tmp_path, directory, capsys)
    assert f"{MAX_RESULTS_BYTES + 1} bytes, limit {MAX_RESULTS_BYTES} bytes" in err, err


def test_an_identity_file_that_is_a_fifo_or_wrong_leaves_the_identity_unknown(tmp_path, capsys):
    """history.json only says which harness and runtime ran: without it the run is kept."""
    directory = results_dir(tmp_path, lines=(RESULT,))
    os.mkfifo(directory / "history.json")
    store = str(tmp_path / "h.sqlite")
    assert cli_main(["history", "--history", store, "--catch-up", str(directory)]) == 0
    assert "1 of 1 tests added" in capsys.readouterr().out
    (directory / "history.json").unlink()
    (directory / "history.json").write_text(json.dumps({"harness_version": {"x": 1}}))
    assert cli_main(["history", "--history", store, "--catch-up", str(directory)]) == 0
    assert "0 of 1 tests added" in capsys.readouterr().out


def test_what_a_run_from_elsewhere_says_reaches_the_terminal_without_escapes(tmp_path, capsys):
    run = {**RUN, "run": "\x1b[2J\x1b]0;x\x07night", "host": "h\nFAKE", "devices": ["d\x1b[31m"]}
    line = {**RESULT, "nodeid": "suites/t.py::test_a[\x1b[2J]", "outcome": "failed"}
    directory = results_dir(tmp_path, run, lines=(line,))
    store = str(tmp_path / "h.sqlite")
    assert cli_main(["history", "--history", store, "--catch-up", str(directory)]) == 0
    capsys.readouterr()
    assert cli_main(["history", "--history", store]) == 0
    out = capsys.readouterr().out
    assert "?[2J?]0;x?night" in out and "h?FAKE" in out, out
    assert "\x1b" not in out and "\x07" not in out and "FAKE\n" not in out


def test_nesting_too_deep_for_json_is_one_line(tmp_path, capsys):
    directory = results_dir(tmp_path, lines=(RESULT,))
    (directory / "results.jsonl").write_text("[" * 100_000 + "\n")
    assert "results.jsonl:1: not a test result: nested too deep" in catch_up(
        tmp_path, directory, capsys
    )


def test_runs_are_found_beside_a_folder_nested_deeper_than_python_recurses(tmp_path, capsys):
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    deep = artifacts
    try:
        for _ in range(1200):  # a walk by recursion (Path.rglob) raised RecursionError
            (deep / "d").mkdir()
            deep /= "d"
        (artifacts / "job-1").mkdir()
        results_dir(artifacts / "job-1", lines=(RESULT,))
        store = str(tmp_path / "h.sqlite")
        assert cli_main(["history", "--history", store, "--catch-up", str(artifacts)]) == 0
        assert "1 of 1 tests added" in capsys.readouterr().out
    finally:  # removed here, bottom up: shutil.rmtree (pytest's clean-up) recurses too
        while deep != artifacts:
            deep.rmdir()
            deep = deep.parent


def test_only_a_last_line_cut_short_is_passed_over(tmp_path, capsys):
    """A killed run leaves a line without its end; a whole last line must be a result."""
    directory = results_dir(tmp_path, lines=(RESULT, {**RESULT, "outcome": "won"}))
    assert "results.jsonl:2: not a test result: 'outcome'" in catch_up(tmp_path, directory, capsys)
    with open(directory / "results.jsonl", "w") as cut:
        cut.write(json.dumps(RESULT) + "\n" + json.dumps(RESULT)[:30])
    store = str(tmp_path / "h.sqlite")
    assert cli_main(["history", "--history", store, "--catch-up", str(directory)]) == 0
    assert "1 of 1 tests added" in capsys.readouterr().out


def test_a_merged_artifact_of_a_folder_named_like_a_url_scheme_stays_a_path(tmp_path):
    job = tmp_path / "nightly:1"
    job.mkdir()
    line = {**RESULT, "artifacts": ["artifacts/host/t/try-1/core"]}
    (job / "results.jsonl").write_text(json.dumps(line) + "\n")
    (merged,) = merge([job], tmp_path)  # merged beside it: "nightly:1/..." is its path
    assert merged.artifacts == ("./nightly:1/artifacts/host/t/try-1/core",)
    assert read_results(tmp_path / "results.jsonl") == [merged]
