"""Several runtimes in one run: ``--runtime 1.5.1,1.5.0,PREFIX`` (harness/runtime/choice.py).

An entry is checked before any test; each device test runs once per runtime, the runtime
in its id, results, JUnit, report and history. One end-to-end run on a host-like device
builds the agent against both pinned wheels, two cases each; install prefixes (laid out
from the wheel as tests/system/test_sdk_prefix.py does, which builds against one) are parsed and
resolved here without a build of their own.
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_farm_runs import Farm, child
from test_sdk_prefix import lay_out_prefix

from harness.cli.bisect import commits_between
from harness.farm.policy import FarmPolicy
from harness.farm.runtime_served import (
    RuntimeNotRunning,
    check_announced_runtime,
    runtime_not_served,
)
from harness.farm.slot import DeviceSlot
from harness.profiles.device_profile import load_profile
from harness.results.html_report import render_report
from harness.results.records import CaseResult, VerdictRecord
from harness.results.summary import across_runtimes, across_runtimes_lines
from harness.runtime import choice as runtimes_module
from harness.runtime.choice import (
    Runtime,
    RuntimeEntryError,
    RuntimeKind,
    parse_runtimes,
    sdk_for,
)
from harness.runtime.wheel_sdk import SdkPaths, ensure_sdk
from harness.untrusted.trust import TRUSTED_PROFILES_ENV

REPO = Path(__file__).resolve().parents[2]


def test_1_5_0_is_its_own_sdk_and_differs_from_1_5_1_in_its_threadpool() -> None:
    old, new = ensure_sdk("x86_64", "1.5.0"), ensure_sdk("x86_64", "1.5.1")
    assert (old.version, new.version) == ("1.5.0", "1.5.1") and old.root != new.root
    differing = [
        p.name
        for p in sorted(old.lib.glob("*.so"))
        if p.read_bytes() != (new.lib / p.name).read_bytes()
    ]
    assert differing == ["libexecutorch_threadpool.so"]
    version_file = old.cmake_dir / "executorch-config-version.cmake"
    assert 'PACKAGE_VERSION "1.5.0"' in version_file.read_text()


def _git_tree(path: Path) -> str:
    """A git checkout with the mark of an ExecuTorch source tree; its one commit."""
    (path / "runtime" / "executor").mkdir(parents=True)
    (path / "runtime" / "executor" / "program.cpp").write_text("// a tree\n")
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    subprocess.run([*git, "tag", "v1"], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_entries_are_parsed_into_their_kinds(tmp_path) -> None:
    prefix = lay_out_prefix(tmp_path / "my-et", version="1.5.1")
    tree = tmp_path / "executorch"
    commit = _git_tree(tree)
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "branch", "feature/x"], check=True)
    parsed = parse_runtimes(f"1.5.1, wheel:1.5.0,{prefix},source:{tree},{tree}@v1")
    (slashed,) = parse_runtimes(f"{tree}@feature/x")
    assert (slashed.path, slashed.revision, slashed.commit) == (tree.resolve(), "feature/x", commit)
    assert [(r.kind, r.label) for r in parsed] == [
        (RuntimeKind.WHEEL, "1.5.1"),
        (RuntimeKind.WHEEL, "1.5.0"),
        (RuntimeKind.PREFIX, "prefix-my-et"),
        (RuntimeKind.SOURCE, "source-executorch"),
        (RuntimeKind.SOURCE, "source-executorch@v1"),
    ]
    assert parsed[4] == Runtime(
        RuntimeKind.SOURCE, f"{tree}@v1", path=tree.resolve(), revision="v1", commit=commit
    )
    assert parsed[0].wheel_version == "1.5.1" and parsed[2].wheel_version is None
    assert parse_runtimes(None) == ()
    assert sdk_for(parsed[1], "x86_64") == ensure_sdk("x86_64", "1.5.0")
    assert sdk_for(parsed[2], "x86_64").root == prefix.resolve()


def test_a_tree_vendored_in_a_larger_repository_is_read_and_bisected_within_it(tmp_path) -> None:
    """ExecuTorch as a folder of another project: a revision of it is a source tree, and a
    bisect steps only through the commits that changed that folder."""
    repository = tmp_path / "product"
    tree = repository / "third-party" / "executorch"
    tree.mkdir(parents=True)
    first = _git_tree(repository)  # the mark at the top: not the vendored tree's
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    hashes = []
    for name, text in (("executorch/runtime/executor/program.cpp", "// 1\n"),
                       ("app.cpp", "// the product\n"),
                       ("executorch/runtime/executor/program.cpp", "// 2\n")):  # fmt: skip
        (repository / "third-party" / name).parent.mkdir(parents=True, exist_ok=True)
        (repository / "third-party" / name).write_text(text)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", name], check=True)
        done = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        hashes.append(done.stdout.strip())
    (vendored,) = parse_runtimes(f"{tree}@{hashes[0][:10]}")
    assert (vendored.kind, vendored.commit) == (RuntimeKind.SOURCE, hashes[0])
    with pytest.raises(RuntimeEntryError, match=r" at [0-9a-f]{10} is not an ExecuTorch source"):
        parse_runtimes(f"{tree}@{first[:10]}")  # the folder is empty at that commit
    assert commits_between(tree, first, hashes[-1], find_fix=False) == [hashes[0], hashes[2]]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("1.4.9", r"--runtime '1\.4\.9': no executorch 1\.4\.9 wheel is pinned"),
        ("1.5.1,,1.5.0", r"--runtime '': an entry is a version, a path or PATH@REV"),
        ("1.5.1,1.5.1", r"--runtime '1\.5\.1': the same runtime as '1\.5\.1'"),
        ("/no/such/dir", r"/no/such/dir is no directory, and '/no/such/dir' is no pinned version"),
        ("{tmp}", r"is neither an install prefix \(no lib/libexecutorch\.so\) nor a source tree"),
        ("{tree}@-rf", r"@'-rf' is not a git revision .*not starting with '-'"),
        ("{tree}@nosuch", r"'nosuch' names no commit in .*; fetch it there"),
        ("prefix:{prefix}@v1", r"a revision goes with a source tree, not an install prefix"),
        ("prefix:{tmp}", r"has no lib/libexecutorch\.so"),
        ("source:{tmp}", r"is not an ExecuTorch source tree \(no runtime/executor/program\.cpp\)"),
        ("1.5.0\x1b[2J", r"printable characters"),
        ("source:", r"--runtime 'source:': give a directory after source:"),
        ("wheel: ", r"give a pinned version after wheel:"),
        (
            "{tree}@v1,{tree}@HEAD",
            r"the same commit as '.*' \([0-9a-f]{12}\); give each commit once",
        ),
        ("{tree}@empty", r"executorch at empty is not an ExecuTorch source tree"),
    ],
)
def test_a_bad_entry_is_one_line_naming_it_and_the_fix(tmp_path, entry, message) -> None:
    tree = tmp_path / "executorch"
    _git_tree(tree)
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run([*git, "checkout", "-q", "--orphan", "empty"], check=True)
    subprocess.run([*git, "rm", "-rqf", "."], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "no tree"], check=True)
    subprocess.run([*git, "checkout", "-q", "-f", "v1"], check=True)
    prefix = lay_out_prefix(tmp_path / "my-et", version="1.5.1") if "prefix" in entry else tmp_path
    spec = entry.format(tmp=tmp_path, tree=tree, prefix=prefix)
    with pytest.raises(RuntimeEntryError, match=message) as caught:
        parse_runtimes(spec)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("--runtime ")


def test_a_source_runtime_is_built_by_the_one_call_into_source_runtime(
    tmp_path, monkeypatch
) -> None:
    """The call site the source-tree build connects to: (tree, commit or None, ABI)."""
    tree = tmp_path / "executorch"
    commit = _git_tree(tree)
    calls: list[tuple[object, ...]] = []
    built = ensure_sdk("x86_64")

    def source_runtime(*args: object) -> SdkPaths:
        calls.append(args)
        return built

    monkeypatch.setattr("harness.runtime.source_tree.source_runtime", source_runtime)
    at_tag, as_is = parse_runtimes(f"{tree}@v1,source:{tree}")
    assert sdk_for(at_tag, "aarch64") is built and sdk_for(as_is, "x86_64") is built
    assert calls == [(tree.resolve(), commit, "aarch64"), (tree.resolve(), None, "x86_64")]
    assert runtimes_module.RuntimeKind.SOURCE is at_tag.kind


def test_devices_whose_agent_is_not_built_here_skip_a_runtime_saying_why(
    tmp_path, monkeypatch
) -> None:
    (one,) = parse_runtimes("1.5.0")
    board = load_profile(str(REPO / "devices" / "mcu-emu.yaml"))
    assert "its firmware is its agent" in (runtime_not_served(board, one) or "")
    prebuilt = tmp_path / "phone.yaml"
    monkeypatch.setenv(TRUSTED_PROFILES_ENV, str(prebuilt))
    prebuilt.write_text(f"transport: {{kind: local}}\nagent: {{prebuilt: {tmp_path}}}\n")
    assert "runs a prebuilt agent" in (runtime_not_served(load_profile(str(prebuilt)), one) or "")
    assert runtime_not_served(load_profile(str(REPO / "devices" / "host.yaml")), one) is None


def test_an_agent_that_announces_another_version_is_refused() -> None:
    (old,) = parse_runtimes("1.5.0")
    host = load_profile(str(REPO / "devices" / "host.yaml"))
    slot = DeviceSlot(host, FarmPolicy(), runtime=old)
    assert slot.profile.agent.runtime == old and host.agent.runtime is None
    check_announced_runtime(slot.name, slot.runtime, "executorch 1.5.0")
    with pytest.raises(
        RuntimeNotRunning,
        match=r"was to run executorch 1\.5\.0 .* but its "
        r"agent announces executorch 1\.5\.1",
    ):
        check_announced_runtime(slot.name, slot.runtime, "executorch 1.5.1")


def _result(test: str, label: str, outcome: str, difference: str = "") -> CaseResult:
    verdict = VerdictRecord(
        "set",
        not difference,
        "set",
        (difference,) if difference else (),
        (("ProbeA", not difference),),
    )
    return CaseResult(
        f"s.py::{test}[host-{label}-0]",
        "host",
        outcome,
        0.1,
        1.0,
        verdicts=(verdict,),
        runtime_label=label,
    )


def test_the_report_shows_side_by_side_only_the_checks_that_differ() -> None:
    results = [
        _result("test_same", "1.5.1", "passed"),
        _result("test_same", "1.5.0", "passed"),
        _result("test_lifetime", "1.5.1", "passed"),
        _result("test_lifetime", "1.5.0", "failed", "ProbeA: key 'k' 1 was 7"),
        _result("test_new", "1.5.1", "passed"),
    ]
    labels, differing, agreeing = across_runtimes(results)
    assert labels == ["1.5.1", "1.5.0"] and agreeing == 1
    assert [(check, sorted(on)) for check, _, on in differing] == [
        ("s.py::test_lifetime[host-0]", ["1.5.0", "1.5.1"]),
        ("s.py::test_new[host-0]", ["1.5.1"]),
    ]
    assert across_runtimes_lines(results) == [
        "2 check(s) differ on 1.5.1, 1.5.0 (1 the same)",
        "s.py::test_lifetime[host-0] on host: 1.5.1 passed, 1.5.0 failed",
        "s.py::test_new[host-0] on host: 1.5.1 passed, 1.5.0 not run",
    ]
    page = render_report(results)
    assert "Across runtimes: 2 check(s) differ" in page
    row = page.split("<th>s.py::test_lifetime[host-0]</th>", 1)[1].split("</tr>", 1)[0]
    assert row.index('class="passed"') < row.index('class="failed"')  # 1.5.1, then 1.5.0
    assert "ProbeA: key &#x27;k&#x27; 1 was 7" in row
    assert "not run" in page.split("<th>s.py::test_new[host-0]</th>", 1)[1].split("</tr>")[0]
    assert "<th>host@1.5.1</th><th>host@1.5.0</th>" in page  # the matrix's columns
    assert "Across runtimes" not in render_report(results[:1])
    assert across_runtimes_lines(results[:1]) == []


@pytest.mark.slow
def test_one_run_across_both_wheels_keys_everything_by_runtime(tmp_path) -> None:
    """Two cases per runtime: each runtime costs an agent build on an empty cache (~20 s)."""
    work, root = tmp_path / "work", tmp_path / "farm"
    work.mkdir()
    root.mkdir()
    farm = Farm(root, work, cases=2)
    farm.profile("alpha")
    junit = farm.root / "junit.xml"
    labels = ("1.5.1", "1.5.0")
    run = farm.run(
        "--device", "alpha", "--runtime", ",".join(labels), f"--junitxml={junit}", timeout=600
    )
    assert run.returncode == 0, run.stdout
    results = run.results()
    assert sorted(results) == sorted(
        [f"test_set[alpha-{label}-{n}]" for label in labels for n in range(2)]
        + ["test_without_device"]
    )
    announced = {r["runtime_label"]: r["facts"]["runtime"] for r in results.values() if r["device"]}
    assert announced == {"1.5.1": "executorch 1.5.1", "1.5.0": "executorch 1.5.0"}
    assert "devices: alpha; runtimes: 1.5.1, 1.5.0" in run.stdout
    assert "alpha@1.5.0" in run.stdout.split("== device farm ==", 1)[1]
    assert "0 check(s) differ on 1.5.1, 1.5.0 (2 the same)" in run.stdout
    suite = child(ET.parse(junit).getroot(), "testsuite")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "test_set[alpha-1.5.0-1]")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert (props["device"], props["runtime_label"]) == ("alpha", "1.5.0")
    suite_props = {p.get("name"): p.get("value") for p in child(suite, "properties")}
    assert suite_props["runtimes"] == ",".join(labels)
    assert suite_props["device.alpha@1.5.0.runtime"] == "executorch 1.5.0"
    page = (run.results_dir / "report.html").read_text("utf-8")
    assert "".join(f"<th>alpha@{label}</th>" for label in labels) in page
    assert "Across runtimes: 0 check(s) differ" in page
    assert json.loads((run.results_dir / "run.json").read_text())["runtimes"] == list(labels)
