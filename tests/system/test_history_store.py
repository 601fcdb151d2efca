"""The run history's store, fed directly: SQLite files and a real PostgreSQL server.

Concurrent writers, a writer SIGKILLed mid-run, damaged, foreign, older and newer
stores, generated run sequences checked against a simple model, and a seeded flaky
test and regression found (docs/device-farm.md, "Run history").
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from postgres_server import postgres_server
from sqlalchemy import inspect

from harness.cli.main import main as cli_main
from harness.history.catch_up import catch_up
from harness.history.command import analyse
from harness.history.flaky import flaky_checks
from harness.history.migrations import MIGRATIONS
from harness.history.regression import regressions
from harness.history.schema import metadata
from harness.history.since_last import since_last
from harness.history.store import HistoryStore, StoreError, StoreUnreachable
from harness.history.stored_runs import (
    COMPLETE,
    INCOMPLETE,
    RunIdentity,
    RunRecord,
    case_row,
    run_id,
    run_row,
)
from harness.history.view import CaseFilter, History
from harness.results.directory import RunInfo
from harness.results.records import CaseResult, InfraRecord, VerdictRecord

REPO = Path(__file__).resolve().parents[2]
SUITE = "suites/test_h.py"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


_fresh = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty store of either kind (a fresh database on the one server for PostgreSQL)."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    import psycopg
    from sqlalchemy.engine import make_url

    base = request.getfixturevalue("postgres_url")
    name = f"h{os.getpid()}_{next(_fresh)}"
    host = make_url(base).query["host"]
    with psycopg.connect(f"host={host} port=5432 user=et dbname=history", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return base.replace("/history?", f"/{name}?")


def result(test: str, device: str, outcome: str, **facts: str) -> CaseResult:
    """``outcome`` ``quarantined`` is an infrastructure error: the device was quarantined."""
    infra = None
    if outcome == "infra":
        infra = InfraRecord("TransportLost", "gone", "call")
    elif outcome == "quarantined":
        outcome, infra = "infra", InfraRecord("DeviceQuarantined", "health check failed", "setup")
    verdict = VerdictRecord(
        "set",
        outcome == "passed",
        "set",
        ("ProbeA: wrong",) if outcome == "failed" else (),
        (("ProbeA", outcome == "passed"),),
    )
    return CaseResult(
        f"{SUITE}::{test}[{device}]",
        device,
        outcome,
        0.5,
        1.0,
        facts={"runtime": "executorch 1.5.1", "agent_version": "0.1.0", **facts},
        verdicts=(verdict,),
        infra=infra,
    )


def write_run(
    store: HistoryStore,
    name: str,
    started: float,
    outcomes: dict[tuple[str, str], str],
    commit: str = "",
    devices: tuple[str, ...] = ("alpha", "beta"),
    finish: bool = True,
) -> str:
    info = RunInfo(name, ("pytest",), "farm-1", tuple(devices), started)
    identity = RunIdentity("0.1.0", "abc", "wheel executorch==1.5.1", commit)
    store.add_run(run_row(info, identity, Path("/r") / name, "", "live"))
    key = run_id(info)
    rows = [
        case_row(key, n, result(test, device, outcome, place=f"place-{device}"))
        for n, ((test, device), outcome) in enumerate(sorted(outcomes.items()))
    ]
    store.add_cases(rows)
    if finish:
        store.end_run(key, started + 1, 0)
    return key


def test_the_migrations_make_exactly_the_schema_the_queries_use(target):
    store = HistoryStore.open(target)
    found = inspect(store.engine)
    for table in metadata.tables.values():
        assert {c["name"] for c in found.get_columns(table.name)} == set(table.columns.keys())
    HistoryStore.open(target).close()  # opening again migrates nothing
    store.close()


def run_in(history: History, key: str) -> RunRecord:
    """The run ``key`` of ``history``, which the test wrote."""
    run = history.run(key)
    assert run is not None, f"no run {key} in the history"
    return run


def test_two_runs_in_a_row_name_the_check_that_changed(target):
    store = HistoryStore.open(target)
    checks = {
        ("test_a", "alpha"): "passed",
        ("test_b", "alpha"): "passed",
        ("test_a", "beta"): "passed",
        ("test_b", "beta"): "failed",
    }
    write_run(store, "n1", 100.0, checks, commit="c1")
    now = write_run(
        store,
        "n2",
        200.0,
        {
            **checks,
            ("test_a", "beta"): "failed",
            ("test_b", "beta"): "passed",
            ("test_b", "alpha"): "infra",
            ("test_c", "beta"): "quarantined",
        },
        commit="c2",
    )
    history = History.load(store, 10)
    diff = since_last(history, run_in(history, now))
    assert diff.previous is not None and diff.previous.name == "n1"
    assert [(c.nodeid, c.then, c.now) for c in diff.new_failures] == [
        (f"{SUITE}::test_a[beta]", "passed", "failed")
    ]
    assert [c.nodeid for c in diff.fixed] == [f"{SUITE}::test_b[beta]"]
    assert [c.nodeid for c in diff.new_infra] == [
        f"{SUITE}::test_b[alpha]",
        f"{SUITE}::test_c[beta]",
    ]
    assert [(q.device, q.new, q.cause) for q in diff.quarantines] == [
        ("beta", True, "health check failed")
    ]
    assert diff.new_failures[0].detail == "ProbeA: wrong"
    (began,) = regressions(history, run_in(history, now))
    assert began.last_good is not None
    assert (began.first_failing.sdk_commit, began.last_good.sdk_commit) == ("c2", "c1")
    store.close()


WRITER = textwrap.dedent("""
    import dataclasses, sys, time
    from pathlib import Path
    from harness.results.records import CaseResult
    from harness.results.directory import RESULTS_FILE, ResultsWriter, RunInfo
    from harness.history.live import LiveHistory
    target, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    results_dir = Path(sys.argv[4])
    info = RunInfo.starting(name, ["writer"], ["alpha"])
    info.write(results_dir)
    live = LiveHistory(target)
    writer = ResultsWriter(results_dir / RESULTS_FILE)
    live.run_started(info, results_dir)
    for n in range(count):
        case = CaseResult(f"suites/test_w.py::test_{n}[alpha]", "alpha", "passed", 0.1, time.time(),
                          run=name)
        writer.write(case)   # what the results recorder does: the file, then its listeners
        live.result_written(case)
        print(n, flush=True)
    if live.lost:
        sys.exit("lost: " + live.lost)
    live.run_finished(dataclasses.replace(info, finished=time.time(), exit_status=0))
""")


def _writer(target: str, name: str, count: int, results_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, target, name, str(count), str(results_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_concurrent_writers_lose_no_row_and_corrupt_nothing(target, tmp_path):
    # Three writers open the new store at once: one makes the tables, the others wait.
    writers = [_writer(target, f"w{n}", 60, tmp_path / f"w{n}") for n in range(3)]
    for writer in writers:
        _, err = writer.communicate(timeout=240)
        assert writer.returncode == 0, err
    store = HistoryStore.open(target)
    runs = store.recent_runs(10)
    assert sorted((r.name, r.state) for r in runs) == [(f"w{n}", COMPLETE) for n in range(3)]
    assert [store.count_cases(r.id) for r in runs] == [60, 60, 60]
    # Catching up the same runs (twice, at once) adds nothing.
    catchers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "history",
                "--history",
                target,
                "--json",
                "--catch-up",
                *(str(tmp_path / f"w{n}") for n in range(3)),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for catcher in catchers:
        _, raw_err = catcher.communicate(timeout=120)  # bytes: no text=True here
        assert catcher.returncode == 0, raw_err
    assert [store.count_cases(r.id) for r in store.recent_runs(10)] == [60, 60, 60]
    store.close()
    if "://" not in target:
        with sqlite3.connect(target) as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_a_writer_killed_mid_run_is_incomplete_and_catching_up_keeps_every_test(target, tmp_path):
    writer = _writer(target, "killed", 100000, tmp_path / "killed")
    assert writer.stdout is not None and writer.stderr is not None  # pipes: _writer's
    for line in writer.stdout:
        if int(line) >= 20:
            break
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    writer.stdout.close()
    writer.stderr.close()
    in_file = len((tmp_path / "killed" / "results.jsonl").read_text().splitlines())
    store = HistoryStore.open(target)
    (run,) = store.recent_runs(5)
    assert run.state == "running"  # until a reader sees its writer gone:
    assert cli_main(["history", "--history", target, "--json"]) == 0
    (run,) = store.recent_runs(5)
    assert run.state == INCOMPLETE
    assert in_file - 1 <= store.count_cases(run.id) <= in_file
    done = catch_up(store, tmp_path / "killed")
    assert store.count_cases(run.id) == in_file == done.total
    assert store.recent_runs(5)[0].state == INCOMPLETE
    store.close()


def test_an_unreachable_server_is_one_line_and_the_run_catches_up_later(tmp_path, capsys):
    closed = "postgresql://et:s3cret@127.0.0.1:1/history"
    with pytest.raises(StoreUnreachable) as caught:
        HistoryStore.open(closed)
    assert "\n" not in str(caught.value) and "127.0.0.1:1" in str(caught.value)
    writer = _writer(closed, "offline", 5, tmp_path / "offline")
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 1 and "lost: history" in err  # ran to its end regardless
    assert "s3cret" not in err + str(caught.value) and "et:***@127.0.0.1:1" in err
    assert len((tmp_path / "offline" / "results.jsonl").read_text().splitlines()) == 5
    later = str(tmp_path / "h.sqlite")
    assert cli_main(["history", "--history", later, "--catch-up", str(tmp_path / "offline")]) == 0
    assert re.search(r"caught up [^ ]+/offline/[\d.]+: 5 of 5 tests added", capsys.readouterr().out)


def _cli_error(target: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli_main(["history", "--history", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_damaged_foreign_and_newer_stores_are_one_line_errors(tmp_path, capsys):
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    assert "not an SQLite database" in _cli_error(str(damaged), capsys)
    text = tmp_path / "notes.txt"
    text.write_text("shopping list\n" * 100)
    assert "not an SQLite database" in _cli_error(str(text), capsys)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE customers (id INTEGER)")
    err = _cli_error(str(foreign), capsys)
    assert "customers" in err and "not an et-harness history store" in err
    newer = tmp_path / "newer.sqlite"
    HistoryStore.open(str(newer)).close()
    with sqlite3.connect(newer) as db:
        db.execute("INSERT INTO et_history_migrations VALUES (99, 0)")
    assert "schema version 99 is newer" in _cli_error(str(newer), capsys)
    assert "is a directory" in _cli_error(str(tmp_path), capsys)
    assert "not supported" in _cli_error("mysql://x@y/z", capsys)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("UPDATE et_history_cases SET duration = 'slow'", "holds 'slow' (str) as its duration"),
        ("UPDATE et_history_runs SET devices = X'00ff'", "(bytes) as its devices, not str"),
        ("UPDATE et_history_runs SET exit_status = 1.5", "holds 1.5 (float) as its exit_status"),
    ],
)
def test_a_row_of_a_type_the_harness_never_writes_is_one_line(tmp_path, capsys, change, said):
    """A store is shared lab data: a value changed by other hands fails reading it in one
    line, naming the run and the column, never a traceback in the analyses."""
    target = str(tmp_path / "history.sqlite")
    with contextlib.closing(HistoryStore.open(target)) as store:
        key = write_run(store, "nightly", 1000.0, {("t", "alpha"): "passed"})
    with contextlib.closing(sqlite3.connect(target)) as db, db:
        db.execute(change)
    err = _cli_error(target, capsys)
    assert f"history {target}: a " in err and f"of run '{key}' " in err and said in err, err
    assert "changed outside the harness, or damaged; repair that row" in err, err


def test_a_store_of_the_older_schema_is_migrated_and_keeps_its_runs(tmp_path):
    old = tmp_path / "v1.sqlite"
    with sqlite3.connect(old) as db:
        db.execute(
            "CREATE TABLE et_history_migrations (version INTEGER PRIMARY KEY, "
            "applied FLOAT NOT NULL)"
        )
        for statement in MIGRATIONS[1]:
            db.execute(statement)
        db.execute("INSERT INTO et_history_migrations VALUES (1, 0)")
        db.execute(
            "INSERT INTO et_history_runs VALUES ('h/r1', 'r1', 'h', '[]', 'alpha', '/r', "
            "'0.1.0', '', 'wheel', '', 1.0, 2.0, 0, 'complete', '', 'live')"
        )
        db.execute(
            "INSERT INTO et_history_cases VALUES ('h/r1', 's::t[alpha]', 0, 's', 'alpha', "
            "'failed', 0.1, 1.0, 'executorch 1.5.1', '0.1.0', 'set', 'ProbeA', 'x', '', "
            "'', 1)"
        )
    store = HistoryStore.open(str(old))
    (run,) = store.recent_runs(5)
    (case,) = store.cases_of([run.id])
    assert (run.name, case.outcome, case.place) == ("r1", "failed", "")
    with sqlite3.connect(old) as db:
        assert [v for (v,) in db.execute("SELECT version FROM et_history_migrations")] == [1, 2, 3]
    store.close()


def test_a_store_of_schema_2_is_migrated_to_key_checks_by_runtime(target, monkeypatch):
    from harness.history import migrations

    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 2)  # a store as the harness left it
    store = HistoryStore.open(target)
    with store.engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO et_history_runs VALUES ('h/r1', 'r1', 'h', '[]', 'alpha', '/r', "
            "'0.1.0', '', 'wheel', '', 1.0, 2.0, 0, 'complete', '', 'live')"
        )
        connection.exec_driver_sql(
            "INSERT INTO et_history_cases VALUES ('h/r1', 's::t[alpha]', 0, 's', 'alpha', "
            "'failed', 0.1, 1.0, 'executorch 1.5.1', '0.1.0', 'set', 'ProbeA', 'x', '', '', 1, "
            "'', '')"
        )
    store.close()
    monkeypatch.undo()
    store = HistoryStore.open(target)
    (old,) = store.recent_runs(5)
    assert (old.name, old.runtimes) == ("r1", ())
    (case,) = store.cases_of([old.id])
    assert (case.key, case.outcome) == (("s::t[alpha]", "alpha", ""), "failed")
    # The migrated store takes a run across runtimes, which is no run like the old one.
    now = write_runtimes_run(store, "r2", 3.0, {"1.5.1": "failed", "1.5.0": "passed"})
    history = History.load(store, 10)
    assert since_last(history, run_in(history, now)).previous is None
    found = inspect(store.engine)
    assert "runtime_label" in {c["name"] for c in found.get_columns("et_history_cases")}
    assert "et_history_cases_check" in {i["name"] for i in found.get_indexes("et_history_cases")}
    store.close()


def write_runtimes_run(
    store: HistoryStore, name: str, started: float, outcomes: dict[str, str], commit: str = ""
) -> str:
    """A run of ``test_a`` on alpha across the runtimes ``outcomes`` names (label: outcome)."""
    info = RunInfo(name, ("pytest",), "farm-1", ("alpha",), started, runtimes=tuple(outcomes))
    identity = RunIdentity.of_this_process(info.runtimes)
    store.add_run(run_row(info, identity, Path("/r") / name, "", "live"))
    key = run_id(info)
    rows = []
    for n, (label, outcome) in enumerate(outcomes.items()):
        case = result("test_a", "alpha", outcome)
        case = dataclasses.replace(
            case, nodeid=f"{SUITE}::test_a[alpha-{label}]", runtime_label=label
        )
        rows.append(case_row(key, n, case))
    store.add_cases(rows)
    store.end_run(key, started + 1, 0)
    return key


def test_since_last_flaky_and_regressions_key_checks_by_runtime(target):
    store = HistoryStore.open(target)
    write_runtimes_run(store, "n1", 100.0, {"1.5.1": "passed", "1.5.0": "passed"}, "c1")
    write_runtimes_run(store, "only-one", 150.0, {"1.5.1": "passed"})  # not comparable
    write_runtimes_run(store, "n2", 200.0, {"1.5.1": "passed", "1.5.0": "failed"}, "c2")
    write_runtimes_run(store, "n3", 300.0, {"1.5.1": "passed", "1.5.0": "passed"})
    now = write_runtimes_run(store, "n4", 400.0, {"1.5.1": "passed", "1.5.0": "failed"})
    history = History.load(store, 10)
    run = run_in(history, now)
    assert run.runtimes == ("1.5.1", "1.5.0") and run.sdk_source == "runtimes 1.5.1,1.5.0"
    diff = since_last(history, run)
    assert diff.previous is not None
    assert diff.previous.name == "n3"  # "only-one" ran one runtime: not comparable
    assert [(c.nodeid, c.runtime_label, c.then, c.now) for c in diff.new_failures] == [
        (f"{SUITE}::test_a[alpha-1.5.0]", "1.5.0", "passed", "failed")
    ]
    (began,) = regressions(history, run)
    assert began.last_good is not None
    assert (began.runtime_label, began.first_failing.run, began.last_good.run) == (
        "1.5.0",
        "n4",
        "n3",
    )
    (flaky,) = flaky_checks(history, 10)  # 1.5.0 flipped three times
    assert (flaky.runtime_label, flaky.flips) == ("1.5.0", 3)
    only = History.load(store, 10, CaseFilter(runtime="1.5.1"))
    assert {c.runtime_label for cases in only.cases.values() for c in cases} == {"1.5.1"}
    store.close()


# ---- generated run sequences against a simple model --------------------------------------

CHECKS = [(t, d) for t in ("test_a", "test_b", "test_c") for d in ("alpha", "beta")]
OUTCOME = st.sampled_from(["passed", "failed", "error", "infra", "skipped", None])
RUNS = st.lists(st.fixed_dictionaries({c: OUTCOME for c in CHECKS}), min_size=1, max_size=8)


def _model_flaky(
    sequence: list[dict[tuple[str, str] | str, str | None]], window: int
) -> set[tuple[str, str]]:
    found = set()
    for check in CHECKS:
        seen = [
            run[check] == "passed"
            for run in sequence[-window:]
            if run[check] in ("passed", "failed", "error")
        ]
        if len(list(itertools.groupby(seen))) >= 3:
            found.add(check)
    return found


@settings(max_examples=25)
@given(sequence=RUNS, window=st.integers(1, 8))
def test_generated_run_sequences_diff_and_flaky_as_a_simple_model_says(sequence, window):
    sequence = [{"anchor": "passed", **run} for run in sequence]  # every run has the same suites
    with tempfile.TemporaryDirectory() as place:
        store = HistoryStore.open(str(Path(place) / "h.sqlite"))
        for n, run in enumerate(sequence):
            outcomes = {
                ("anchor" if c == "anchor" else c[0], "alpha" if c == "anchor" else c[1]): o
                for c, o in run.items()
                if o is not None
            }
            write_run(store, f"r{n}", float(n), outcomes)
        history = History.load(store, 20)
        store.close()
    diff = since_last(history, history.runs[-1])
    now, then = sequence[-1], (sequence[-2] if len(sequence) > 1 else {})
    failing = ("failed", "error")
    assert {(c.nodeid.split("::")[1].split("[")[0], c.device) for c in diff.new_failures} == {
        c for c in CHECKS if now[c] in failing and then.get(c) not in failing
    }
    assert {(c.nodeid.split("::")[1].split("[")[0], c.device) for c in diff.fixed} == {
        c for c in CHECKS if now[c] == "passed" and then.get(c) in failing
    }
    assert {(c.nodeid.split("::")[1].split("[")[0], c.device) for c in diff.still_failing} == {
        c for c in CHECKS if now[c] in failing and then.get(c) in failing
    }
    assert {(c.nodeid.split("::")[1].split("[")[0], c.device) for c in diff.new_infra} == {
        c for c in CHECKS if now[c] == "infra" and then.get(c) != "infra"
    }
    assert {
        (f.nodeid.split("::")[1].split("[")[0], f.device) for f in flaky_checks(history, window)
    } == _model_flaky(sequence, window)


def test_a_seeded_flaky_test_and_a_seeded_regression_at_a_known_commit_are_found(tmp_path, capsys):
    target = str(tmp_path / "h.sqlite")
    store = HistoryStore.open(target)
    flaky = "passed failed passed passed failed passed passed passed passed passed".split()
    for n in range(10):
        write_run(
            store,
            f"night{n}",
            1000.0 + n,
            {
                ("test_flaky", "alpha"): flaky[n],
                ("test_regress", "alpha"): "passed" if n < 6 else "failed",
                ("test_steady", "alpha"): "passed",
                ("test_steady", "beta"): "infra" if n == 7 else "passed",
            },
            commit=f"commit{n}",
        )
    store.close()
    assert cli_main(["history", "--history", target, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(f["nodeid"], f["flips"]) for f in report["flaky"]] == [
        (f"{SUITE}::test_flaky[alpha]", 4)
    ]
    (began,) = report["regressions"]
    assert began["nodeid"] == f"{SUITE}::test_regress[alpha]"
    assert (began["first_failing"]["sdk_commit"], began["last_good"]["sdk_commit"]) == (
        "commit6",
        "commit5",
    )
    assert began["failing_runs"] == 4 and report["since_last"]["still_failing"]
    beta = next(h for h in report["health"]["device"] if h["name"] == "beta")
    assert [p["infra"] for p in beta["points"]] == [0] * 7 + [1, 0, 0]
    place = next(h for h in report["health"]["place"] if h["name"] == "place-beta")
    assert place["points"] == beta["points"]
    # Filters: another device, a backend no test checked (one line), a test id.
    assert cli_main(["history", "--history", target, "--json", "--device", "beta"]) == 0
    assert json.loads(capsys.readouterr().out)["regressions"] == []
    assert cli_main(["history", "--history", target, "--json", "--backend", "Nope"]) == 2
    assert "matches --backend 'Nope' (there: ProbeA)" in capsys.readouterr().err
    assert (
        cli_main(["history", "--history", target, "--test", "regress", "--flaky-window", "3"]) == 0
    )
    text = capsys.readouterr().out
    assert (
        "test_regress[alpha] on alpha: failing since night6 (executorch 1.5.1, commit "
        "commit6), 4 failing run(s); last good night5 (executorch 1.5.1, commit commit5)"
    ) in text
    assert "test_flaky" not in text
    assert cli_main(["history", "--history", target, "--run", "night9x"]) == 2
    assert "--run night9x: not among the last 10 runs" in capsys.readouterr().err


def test_a_green_run_with_skips_and_expected_failures_is_all_passed(tmp_path, capsys):
    target = str(tmp_path / "h.sqlite")
    store = HistoryStore.open(target)
    green = {("test_a", "alpha"): "passed", ("test_b", "alpha"): "skipped"}
    green[("test_c", "alpha")] = "xfailed"
    write_run(store, "night0", 1000.0, green, devices=("alpha",))
    write_run(store, "night1", 1001.0, {**green, ("test_a", "alpha"): "failed"}, devices=("alpha",))
    store.close()
    assert cli_main(["history", "--history", target, "--json"]) == 0
    (alpha,) = json.loads(capsys.readouterr().out)["health"]["device"]
    assert [(p["pass_rate"], p["judged"]) for p in alpha["points"]] == [(1.0, 1), (0.0, 1)]
    assert cli_main(["history", "--history", target]) == 0
    assert (
        "  alpha: 2 run(s), quarantined in 0; infra   0%   0%; passed 100%   0% "
        "(last run: 0 of 1; 1 skipped, 1 xfailed aside)"
    ) in capsys.readouterr().out.splitlines()


def test_the_plugin_loads_no_database_or_plotting_library():
    script = (
        "import harness.pytest_plugin, harness.cli.main, sys; print(sorted(m for m in "
        "sys.modules if m.split('.')[0] in ('sqlalchemy', 'psycopg', 'matplotlib')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == "[]"


def test_analyse_of_an_empty_store_says_no_runs(tmp_path, capsys):
    store = HistoryStore.open(str(tmp_path / "h.sqlite"))
    assert analyse(History.load(store, 5, CaseFilter()), None, 3) == {"runs": 0, "run": None}
    store.close()
    assert cli_main(["history", "--history", str(tmp_path / "h.sqlite")]) == 0
    assert "no runs yet" in capsys.readouterr().out
    with pytest.raises(StoreError):
        HistoryStore.open(str(tmp_path / "h.sqlite" / "below-a-file"))


def test_reading_a_store_that_is_not_there_makes_nothing(tmp_path, capsys):
    """A mistyped --history is one line; only --catch-up (which writes) makes a store."""
    missing = tmp_path / "nowhere" / "h.sqlite"
    assert "no such store" in _cli_error(str(missing), capsys)
    assert not missing.parent.exists()


def test_history_shows_a_kept_bisect_beside_the_failure_it_explains(tmp_path, capsys, monkeypatch):
    from harness.history.bisect_results import keep_bisect

    monkeypatch.setenv("ET_HARNESS_CACHE", str(tmp_path / "cache"))
    target = str(tmp_path / "h.sqlite")
    store = HistoryStore.open(target)
    for n in range(3):
        write_run(
            store,
            f"night{n}",
            1000.0 + n,
            {("test_regress", "alpha"): "passed" if n < 1 else "failed"},
        )
    store.close()
    keep_bisect(
        {
            "tree": "/src/et",
            "device": "alpha",
            "find_fix": False,
            "builds": 4,
            "selection": [SUITE],
            "found": {
                "hash": "c0ffee" * 6 + "abcd",
                "subject": "planted fault",
                "upstream": "pytorch/executorch@123",
            },
        }
    )
    assert cli_main(["history", "--history", target]) == 0
    text = capsys.readouterr().out
    failing = text.index(f"{SUITE}::test_regress[alpha] on alpha: failing since night1")
    assert (
        text.index(
            "bisected in /src/et: first bad c0ffeec0ffee planted fault (upstream "
            "pytorch/executorch@123); 4 builds"
        )
        > failing
    )
    assert cli_main(["history", "--history", target, "--json"]) == 0
    (began,) = json.loads(capsys.readouterr().out)["regressions"]
    assert began["bisect"]["found"]["subject"] == "planted fault"


def test_a_case_is_kept_under_the_real_backends_it_checked_and_its_probes_only_alone():
    """The per-backend trends name the backends a run was about: a test that checked a
    real backend (HELLO's ``real_backends``) beside probes counts for the real one."""
    both = VerdictRecord("set", True, "set", (), (("ProbeA", True), ("XnnpackBackend", True)))
    mixed = CaseResult(
        f"{SUITE}::test_x[host]",
        "host",
        "passed",
        0.5,
        1.0,
        facts={"real_backends": "XnnpackBackend,QnnBackend"},
        verdicts=(both,),
    )
    probes = VerdictRecord("set", True, "set", (), (("ProbeA", True), ("ProbeB", True)))
    probes_only = dataclasses.replace(mixed, verdicts=(probes,))
    assert case_row("r", 0, mixed)["backends"] == "XnnpackBackend"
    assert case_row("r", 1, probes_only)["backends"] == "ProbeA,ProbeB"


def test_a_filter_that_keeps_no_test_is_one_line_naming_what_the_history_has(tmp_path, capsys):
    target = str(tmp_path / "history.sqlite")
    store = HistoryStore.open(target)
    write_run(store, "n1", 100.0, {("test_a", "alpha"): "passed", ("test_a", "beta"): "failed"})
    store.close()
    assert cli_main(["history", "--history", target, "--device", "alpha"]) == 0
    capsys.readouterr()
    for argv, said in (
        (["--runtime", "nosuch"], "--runtime 'nosuch' (there: each device's own runtime)"),
        (["--device", "gamma"], "--device 'gamma' (there: alpha, beta)"),
        (["--backend", "Nope", "--test", "zzz"], "--backend 'Nope' (there: ProbeA); --test"),
    ):
        assert cli_main(["history", "--history", target, *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("et-harness history: no test of the last 1 run(s) matches ")
        assert said in err and "\n" not in err, err


def test_a_nights_summary_counts_every_job_and_lists_only_what_is_new(tmp_path):
    from harness.history.night import night_lines

    store = HistoryStore.open(str(tmp_path / "history.sqlite"))
    for pool in ("alpha", "beta"):  # last night: all passed
        write_run(
            store, pool, 100.0, {(t, pool): "passed" for t in ("test_a", "test_b")}, devices=(pool,)
        )
    alpha = {("test_a", "alpha"): "failed", ("test_b", "alpha"): "passed"}
    beta = {("test_a", "beta"): "infra", ("test_b", "beta"): "infra"}
    tonight = [
        write_run(store, "alpha", 200.0, alpha, devices=("alpha",)),
        write_run(store, "beta", 201.0, beta, devices=("beta",)),
    ]
    lines = night_lines(History.load(store, 10), tonight)
    assert lines == [
        "night: 2 run(s): 1 passed, 1 failed, 2 infra",
        "  alpha (alpha): 1 passed, 1 failed",
        "  beta (beta): 0 passed, 0 failed, 2 infra",
        "new failures (1)",
        f"  {SUITE}::test_a[alpha] on alpha (alpha): passed -> failed",
        "new infra (2): beta on place-beta: 2",  # counted, not listed one a line
    ]
    store.close()
