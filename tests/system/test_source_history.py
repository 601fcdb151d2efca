"""The runtime built from ExecuTorch's own history (``../shared/vendor/executorch-history.bundle``,
cloned into a temporary folder): what each commit's API offers, the Module lifetime
suite on the commits around "Module deep-copies LoadBackendOptionsMap on load (#19673)",
and ``et-harness bisect`` finding a planted fault.

The README's test command runs the tip (it passes), the tip with #19673 reverted (it fails:
the bug of 4/x..#19673 in the tip's code, built from the tip's objects) and one bisect (a
planted fault on the tip); the tests marked ``nightly`` (.github/workflows/nightly.yml, job
``source-history``) sweep a sample of the commits from 4/x to the one before #19673,
#19673 itself, a commit before "3/x" (it lacks the load-time map), ``bisect
--find-fix`` over the range and the ends on an arm64 board.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prerequisites import require

from harness.cli.bisect import BAD, GOOD, UNTESTABLE, classify
from harness.history.bisect_results import bisect_line, explaining
from harness.lifecycle.cache_entry import entries
from harness.runtime.source_tree import (
    compiler_cache_env,
    describe_source,
    parse_runtime,
    tree_api,
)

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT.parent / "shared" / "vendor" / "executorch-history.bundle"
LIFETIME = "suites/test_module_lifetime.py"
_RUN_TIMEOUT_S = 900

needs_bundle = pytest.mark.skipif(not BUNDLE.is_file(), reason=f"no {BUNDLE}")

SUBJECTS = {
    "3/x": "3/x: Wire LoadBackendOptionsMap through Program and Method",
    "4/x": "4/x: Add LoadBackendOptionsMap support to Module::load()",
    "entry_at": "Add entry_at(i) accessor to LoadBackendOptionsMap (#19645)",
    "deep_copy": "Module deep-copies LoadBackendOptionsMap on load (#19673)",
    "kernel_registry": "Thread kernel_registry through Module::load_method (#19641)",
}


class History:
    """A clone of the bundle: its commits oldest first, found by subject."""

    def __init__(self, path: Path) -> None:
        self.path = path
        log = git(path, "log", "--first-parent", "--reverse", "--format=%H%x09%s")
        self.commits = [tuple(line.split("\t", 1)) for line in log.splitlines()]

    def index(self, landmark: str) -> int:
        subject = SUBJECTS[landmark]
        return next(i for i, (_, s) in enumerate(self.commits) if s == subject)

    def at(self, landmark: str, offset: int = 0) -> str:
        return self.commits[self.index(landmark) + offset][0]


def git(path: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def clone_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """A clone of the bundle in a new temporary folder."""
    clone = tmp_path_factory.mktemp("history") / "executorch"
    subprocess.run(
        ["git", "clone", "-q", "-b", "main", str(BUNDLE), str(clone)],
        check=True, timeout=120, capture_output=True,
    )  # fmt: skip
    return History(clone)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return clone_history(tmp_path_factory)


def run_suites(
    tmp: Path, runtime: str, *suites: str, device: str = "host"
) -> list[dict[str, object]]:
    """The suites on ``device`` with ``ET_HARNESS_RUNTIME=runtime``; their results."""
    results = tmp / f"results-{len(list(tmp.glob('results-*')))}"
    env = {**os.environ, "ET_HARNESS_RUNTIME": runtime, "ET_HARNESS_HISTORY": "off"}
    env.pop("ET_HARNESS_SDK", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *suites, "--device", device, "-q",
         "-p", "no:cacheprovider", "--results-dir", str(results), "-rs"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=_RUN_TIMEOUT_S, check=False,
    )  # fmt: skip
    path = results / "results.jsonl"
    assert path.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert records, done.stdout[-3000:]
    return records


def assert_lifetime(records: list[dict[str, object]], fails: bool) -> None:
    """Every case of the lifetime suite failed naming the path (``fails``), or all passed."""
    outcomes = {str(r["nodeid"]): r["outcome"] for r in records}
    assert len(outcomes) == 3, outcomes
    if not fails:
        assert set(outcomes.values()) == {"passed"}, outcomes
        return
    assert set(outcomes.values()) == {"failed"}, outcomes
    for record in records:
        assert "on load path module" in str(record["longrepr"]), record["longrepr"]
        verdicts = record["verdicts"]
        assert isinstance(verdicts, list) and any(not v["ok"] for v in verdicts)


# ---- cheap: no build -----------------------------------------------------------------


def test_a_runtime_is_a_path_and_an_optional_revision() -> None:
    assert parse_runtime("/src/et@v1.5.0") == (Path("/src/et"), "v1.5.0")
    assert parse_runtime("~/et") == (Path("~/et").expanduser(), None)
    with pytest.raises(Exception, match="nothing after '@'"):
        parse_runtime("/src/et@")


def test_objects_go_to_the_harness_caches_ccache_or_to_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require("ccache")
    monkeypatch.setenv("ET_HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    ours = compiler_cache_env(tmp_path / "build")
    assert (ours["CCACHE_DIR"], ours["CCACHE_MAXSIZE"]) == (str(tmp_path / "cache/ccache"), "2G")
    assert ours["CCACHE_BASEDIR"] == str(tmp_path / "build")
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "mine"))
    users = compiler_cache_env(tmp_path / "build")
    assert users["CCACHE_DIR"] == str(tmp_path / "mine") and "CCACHE_MAXSIZE" not in users


@needs_bundle
def test_what_each_commit_offers_is_read_from_its_headers(history: History) -> None:
    def api(rev: str):
        return describe_source(history.path, rev).api

    before_3x = api(history.at("3/x", -1))
    assert not before_3x.load_time_map and not before_3x.module_load_map
    assert "load-time map" in before_3x.absent()[0]
    at_3x, at_4x = api(history.at("3/x")), api(history.at("4/x"))
    assert at_3x.load_time_map and not at_3x.module_load_map
    assert at_4x.module_load_map and not at_4x.entry_at
    assert api(history.at("entry_at")).entry_at
    assert not api(history.at("kernel_registry", -1)).load_method_kernel_registry
    assert api(history.at("kernel_registry")).load_method_kernel_registry
    assert tree_api(history.path) == api("main")  # the checkout as it is: the tip


@needs_bundle
def test_a_revision_is_exported_into_the_cache_and_the_checkout_untouched(
    history: History,
) -> None:
    status = git(history.path, "status", "--porcelain")
    runtime = describe_source(history.path, history.at("deep_copy"))
    assert runtime.tree != history.path and (runtime.tree / "extension/module/module.cpp").is_file()
    assert runtime.subject == SUBJECTS["deep_copy"]
    assert runtime.upstream.startswith("pytorch/executorch@")
    assert git(history.path, "status", "--porcelain") == status
    assert git(history.path, "worktree", "list").count("\n") == 0
    # an entry of the cache: under its bound, listed and cleaned with it
    assert runtime.tree in {entry.path for entry in entries("source")}


@needs_bundle
def test_a_source_runtimes_tree_and_agents_are_listed_and_cleaned_with_the_cache(
    history: History, tmp_path: Path
) -> None:
    env = {**os.environ, "ET_HARNESS_CACHE": str(tmp_path / "cache")}

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    made = harness("-c", f"""if True:
        from pathlib import Path
        from harness.runtime.source_tree import describe_source
        from harness.lifecycle.cache_entry import CacheEntry
        runtime = describe_source(Path({str(history.path)!r}), {history.at("deep_copy")!r})
        agent = runtime.home / "agent" / "x86_64-0123"  # where harness.runtime.agent_build puts one
        agent.mkdir(parents=True)
        (agent / "et-agent").write_bytes(b"ELF")
        CacheEntry("agent", agent).commit()
        print(runtime.tree)
    """)  # fmt: skip
    assert made.returncode == 0, made.stderr
    tree = Path(made.stdout.strip())
    listed = harness("-m", "harness.cli", "cache")
    assert "2 entries" in listed.stdout and "source " in listed.stdout, listed.stdout
    wrong = harness("-m", "harness.cli", "cache", "clean", "--kind", "nosuch")
    assert wrong.returncode == 2 and "invalid choice: 'nosuch'" in wrong.stderr, wrong.stderr
    cleaned = harness("-m", "harness.cli", "cache", "clean")
    assert cleaned.stdout.startswith("removed 2 entries"), cleaned.stdout + cleaned.stderr
    assert not tree.exists() and not (tree.parent / "agent" / "x86_64-0123").exists()


def test_a_step_is_bad_on_a_failure_and_cannot_tell_on_errors_and_skips() -> None:
    failed = {"nodeid": "t[host]", "outcome": "failed", "verdicts": [
        {"ok": False, "summary": "load [module]: ProbeA WRONG_VALUE threads"}]}  # fmt: skip
    assert classify([failed], 1, "") == (BAD, "t[host]: load [module]: ProbeA WRONG_VALUE threads")
    build = {"nodeid": "t", "outcome": "error", "infra": None, "longrepr": "x\nAgentBuildFailed"}
    assert classify([build], 1, "")[0] == UNTESTABLE
    skipped = {"nodeid": "t[host]", "outcome": "skipped", "longrepr": "('f', 1, 'lacks x')"}
    assert classify([skipped], 0, "")[0] == UNTESTABLE
    assert classify([{"nodeid": "t", "outcome": "passed"}], 0, "") == (GOOD, "1 passed")
    assert classify([], 4, "ERROR: usage")[0] == UNTESTABLE


def test_history_shows_the_bisect_beside_the_failure_it_explains() -> None:
    result = {
        "tree": "/src/et", "device": "host", "find_fix": False, "builds": 2,
        "selection": ["suites/test_module_lifetime.py", "-k", "lazily"],
        "found": {"hash": "a" * 40, "subject": "planted", "upstream": "pytorch/executorch@b"},
    }  # fmt: skip
    nodeid = "suites/test_module_lifetime.py::test_x[host]"
    assert explaining(nodeid, "host", [result]) is result
    assert explaining(nodeid, "ssh-emu", [result]) is None
    assert explaining("suites/test_load_paths.py::t[host]", "host", [result]) is None
    assert bisect_line(result) == (
        "bisected in /src/et: first bad aaaaaaaaaaaa planted (upstream "
        "pytorch/executorch@b); 2 builds"
    )


# ---- the ends and one bisect, on host (the README's test command) ------------------------


def committing_clone(history: History, tree: Path) -> Path:
    """A clone of the history at ``tree``, with an identity to commit as."""
    subprocess.run(["git", "clone", "-q", str(history.path), str(tree)], check=True, timeout=60)
    git(tree, "config", "user.email", "harness@example.invalid")
    git(tree, "config", "user.name", "harness test")
    return tree


def revert_deep_copy(history: History, tmp_path: Path) -> Path:
    """A clone of the history with #19673 (Module deep-copies the map) reverted on its tip:
    Module's code from before the fix, everything else the tip's. Its build takes all but
    Module's objects and the agent's from the tip's; a commit before #19673 (4/x, swept in
    the nightly job) shares none with the tip (the core's headers and the schema changed)."""
    tree = committing_clone(history, tmp_path / "reverted")
    git(tree, "revert", "--no-edit", history.at("deep_copy"))
    return tree


@needs_bundle
@pytest.mark.slow
def test_lifetime_passes_at_the_tip_and_fails_with_the_deep_copy_reverted(
    history: History, tmp_path: Path
) -> None:
    tip = history.commits[-1][0]
    records = run_suites(tmp_path, f"{history.path}@main", LIFETIME)
    assert_lifetime(records, False)
    facts = records[0]["facts"]
    assert f"from source {history.path} @ {tip[:10]}" in facts["runtime"]  # type: ignore[index]
    assert "extension/module" in facts["from_source"]  # type: ignore[index]
    assert not facts.get("real_backends")  # type: ignore[attr-defined]
    reverted = revert_deep_copy(history, tmp_path)
    assert_lifetime(run_suites(tmp_path, f"{reverted}@HEAD", LIFETIME), True)


@pytest.mark.slow
def test_one_run_across_both_wheels_and_a_source_tree_shows_all_three(
    history: History, tmp_path: Path
) -> None:
    """``--runtime 1.5.1,1.5.0,TREE@REV`` on host: each lifetime case runs once per runtime,
    and the report has a column for each (1.5.0 and 1.5.1 pass; so does the tip)."""
    results = tmp_path / "results"
    runtimes = f"1.5.1,1.5.0,{history.path}@main"
    env = {k: v for k, v in os.environ.items() if k not in ("ET_HARNESS_SDK", "ET_HARNESS_RUNTIME")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", LIFETIME, "--device", "host", "--runtime", runtimes,
         "-q", "-p", "no:cacheprovider", "--results-dir", str(results)],
        cwd=ROOT, env={**env, "ET_HARNESS_HISTORY": "off"}, capture_output=True, text=True,
        timeout=_RUN_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    labels = list(dict.fromkeys(str(r["runtime_label"]) for r in records))
    assert labels == ["1.5.1", "1.5.0", "source-executorch@main"], labels
    assert {r["outcome"] for r in records} == {"passed"} and len(records) == 9
    page = (results / "report.html").read_text("utf-8")
    assert "".join(f"<th>host@{label}</th>" for label in labels) in page
    assert "Across runtimes: 0 check(s) differ" in page
    assert f"3 runtime(s) ({', '.join(labels)})" in page


@needs_bundle
@pytest.mark.nightly
def test_a_commit_before_3x_lacks_the_load_time_map_and_its_load_tests_skip(
    history: History, tmp_path: Path
) -> None:
    records = run_suites(tmp_path, f"{history.path}@{history.at('3/x', -1)}", "suites")
    assert "load-time map" in str(records[0]["facts"]["lacks"])  # type: ignore[index]
    assert {r["outcome"] for r in records} <= {"skipped", "passed", "xfailed"}  # never failed
    loading = [
        r
        for r in records
        if str(r["nodeid"]).startswith(("suites/test_load_paths", "suites/test_module_lifetime"))
    ]
    skipped = [r for r in loading if r["outcome"] == "skipped"]
    assert len(loading) > 10 and len(records) > 400, len(records)
    assert len(skipped) >= len(loading) - 1  # one test only loops over what is served
    assert all("the runtime lacks load-time map" in str(r["longrepr"]) for r in skipped)


def plant(history: History, tmp_path: Path) -> tuple[Path, list[str]]:
    """A clone of the history with three commits on its tip: a delivery fault (Module::load
    drops each backend's last option), an unrelated change, a change that does not compile."""
    tree = committing_clone(history, tmp_path / "planted")
    changes = [
        ("extension/module/module.cpp",
         "local_storage.emplace_back(entry.options.begin(), entry.options.end());",
         "local_storage.emplace_back(entry.options.begin(),\n"
         "        entry.options.end() - (entry.options.size() > 1));",
         "planted: Module::load drops each backend's last option"),
        ("runtime/platform/log.cpp", "namespace executorch {",
         "// An unrelated change.\nnamespace executorch {", "planted: an unrelated comment"),
        ("runtime/core/evalue.cpp", "namespace executorch {",
         "#error planted build failure\nnamespace executorch {", "planted: does not compile"),
    ]  # fmt: skip
    made = []
    for file, anchor, replacement, subject in changes:
        path = tree / file
        text = path.read_text("utf-8")
        assert anchor in text, f"{file}: the planted change's anchor is gone"
        path.write_text(text.replace(anchor, replacement, 1), "utf-8")
        git(tree, "commit", "-q", "-am", subject)
        made.append(git(tree, "rev-parse", "HEAD"))
    return tree, made


@needs_bundle
@pytest.mark.slow
def test_bisect_finds_a_planted_fault_and_skips_the_commit_that_does_not_compile(
    history: History, tmp_path: Path
) -> None:
    tree, (fault, _, broken) = plant(history, tmp_path)
    out = tmp_path / "bisect.json"
    env = {**os.environ, "ET_HARNESS_HISTORY": "off"}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "bisect", str(tree), "--good", "HEAD~3",
         "--bad", "HEAD", "--device", "host", "--json", str(out), "--", LIFETIME],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=_RUN_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text("utf-8"))
    assert result["found"]["hash"] == fault, done.stdout
    assert f"first bad commit: {fault[:12]} planted: Module::load drops" in done.stdout
    assert [s["hash"] for s in result["skipped"]] == [broken]
    assert "WRONG" in result["difference"] or "MISSING" in result["difference"], result
    assert result["builds"] <= 3
    runs = [step["commit"] for step in result["steps"]]  # confirmed: it and the good end, 3 each
    assert runs.count(fault) == 3 and runs.count(git(tree, "rev-parse", "HEAD~3")) == 3, runs


def bisect_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "bisect", *args],
        cwd=ROOT, env={**os.environ, "ET_HARNESS_HISTORY": "off"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@needs_bundle
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--device", "hots", "--", LIFETIME], "unknown device 'hots'"),
        (["--device", "host", "--", "suites/test_nope.py"], "suites/test_nope.py"),
        (["--device", "host", "--good", "nosuchrev", "--", LIFETIME], "--good: 'nosuchrev' names"),
    ],
)
def test_bisect_refuses_what_no_step_could_run_before_any_build(
    history: History, args: list[str], expected: str
) -> None:
    """A misspelled device or test path, or a revision that is none: one line, exit 2."""
    ends = ["--good", history.at("4/x"), "--bad", "HEAD"]
    if "--good" in args:
        ends = ["--bad", "HEAD"]
    done = bisect_cli(str(history.path), *ends, *args)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stdout + done.stderr
    assert expected in done.stderr, done.stderr
    if "--good" not in args:  # git bisect run stops on 128, where 2 would mean "bad"
        step = bisect_cli(str(history.path), "--step", *args)
        assert step.returncode == 128 and expected in step.stderr, step.stderr


@needs_bundle
def test_a_bad_runtime_in_the_environment_is_one_usage_error_before_any_test(
    history: History,
) -> None:
    for value, expected in [
        (f"{history.path}@nosuchrev", "'nosuchrev' names no commit"),
        (f"{history.path / 'runtime'}", "is not an ExecuTorch source tree"),
        ("/nonexistent/et", "/nonexistent/et is not a directory"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", LIFETIME, "--device", "host", "-q",
             "-p", "no:cacheprovider"],
            cwd=ROOT, env={**os.environ, "ET_HARNESS_RUNTIME": value},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
        assert f"ERROR: ET_HARNESS_RUNTIME={value}: " in done.stderr and expected in done.stderr
        assert "Traceback" not in done.stdout + done.stderr


# ---- nightly (.github/workflows/nightly.yml, job source-history) -------------------------


def sample(history: History) -> list[str]:
    """4/x, the commit before the deep copy, and five commits evenly between them."""
    first, last = history.index("4/x"), history.index("deep_copy") - 1
    inner = [first + (last - first) * k // 6 for k in range(1, 6)]
    return [history.commits[i][0] for i in (first, *inner, last)]


@needs_bundle
@pytest.mark.nightly
@pytest.mark.parametrize("position", range(7))
def test_lifetime_fails_on_every_sampled_commit_before_the_deep_copy(
    history: History, tmp_path: Path, position: int
) -> None:
    commit = sample(history)[position]
    assert_lifetime(run_suites(tmp_path, f"{history.path}@{commit}", LIFETIME), True)


@needs_bundle
@pytest.mark.nightly
def test_lifetime_passes_from_the_deep_copy_on(history: History, tmp_path: Path) -> None:
    records = run_suites(tmp_path, f"{history.path}@{history.at('deep_copy')}", LIFETIME)
    assert_lifetime(records, False)


@needs_bundle
@pytest.mark.nightly
def test_bisect_find_fix_names_the_deep_copy_and_its_upstream_hash(
    history: History, tmp_path: Path
) -> None:
    out = tmp_path / "bisect.json"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "bisect", str(history.path), "--find-fix",
         "--bad", history.at("4/x"), "--good", "main", "--device", "host",
         "--json", str(out), "--", LIFETIME],
        cwd=ROOT, env={**os.environ, "ET_HARNESS_HISTORY": "off"}, capture_output=True,
        text=True, timeout=3 * _RUN_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text("utf-8"))
    deep_copy = history.at("deep_copy")
    upstream = git(history.path, "log", "-1", "--format=%B", deep_copy).split("upstream: ")[1]
    assert result["found"] == {
        "hash": deep_copy, "subject": SUBJECTS["deep_copy"], "upstream": upstream.strip()
    }  # fmt: skip
    assert f"first good commit: {deep_copy[:12]} {SUBJECTS['deep_copy']}" in done.stdout
    assert result["builds"] <= 10 and result["difference"]


@needs_bundle
@pytest.mark.nightly
def test_lifetime_ends_on_an_arm64_board(history: History, tmp_path: Path) -> None:
    four = run_suites(tmp_path, f"{history.path}@{history.at('4/x')}", LIFETIME, device="ssh-emu")
    assert_lifetime(four, True)
    deep = run_suites(
        tmp_path, f"{history.path}@{history.at('deep_copy')}", LIFETIME, device="ssh-emu"
    )
    assert_lifetime(deep, False)
    assert {r["facts"]["abi"] for r in four + deep} == {"aarch64"}  # type: ignore[index]
