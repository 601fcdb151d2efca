"""``et-harness bisect``: the first commit of a source tree where the selected tests change.

Each step runs the selected tests (pytest, ``-x``) on the device with the runtime built
from the tree at one commit (``$ET_HARNESS_RUNTIME=TREE@COMMIT``,
:mod:`harness.runtime.source_tree`: built in the cache, objects shared between
commits). A step's outcome is *good* (every test that ran passed), *bad* (one failed:
its difference decides) or *cannot tell* (the build failed, an infrastructure error,
every test skipped, say for a capability the tree lacks): that commit is skipped, as
``git bisect`` skips on exit code 125. ``--find-fix`` looks for the first good commit
after bad ones instead.

``--step`` tests the tree as it is checked out and exits as ``git bisect run`` wants:
0 good, 1 bad (with ``--find-fix``: 0 bad, 1 good, for ``git bisect start
--term-old=broken --term-new=fixed``), 125 cannot tell, 128 (which stops ``git bisect
run``) when the device or the tests cannot run at all. Before naming a commit, a
whole bisect runs it and the commit before it again (``--confirm``,
:mod:`harness.cli.bisect_search`); it exits 0 when it names the commit, 1 when it cannot
tell (skipped or flaky commits, a boundary that did not hold, a failing test that is not
the bad end's), 2 on a usage error.
The result is kept for ``et-harness history`` (:mod:`harness.history.bisect_results`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.cli.bisect_search import (
    BAD,
    GOOD,
    MAX_CONFIRM,
    UNTESTABLE,
    Boundary,
    Search,
    Step,
    failing_tests,
)
from harness.errors import UsageError
from harness.lifecycle.git import GitFailed, git_text
from harness.untrusted.value_rules import ValueRuleError, expand_home

SKIP_EXIT = 125  # git bisect run: this commit cannot be tested
ABORT_EXIT = 128  # git bisect run: stop (a device or tests that no step could run)
_STEP_TIMEOUT_S = 1800


class BisectError(UsageError):
    """The bisect cannot start: a revision, the tree or the selection is wrong."""


@dataclasses.dataclass(frozen=True)
class Commit:
    """A commit as the result names it."""

    hash: str
    subject: str
    upstream: str  # "pytorch/executorch@<hash>" when its message names one

    def line(self) -> str:
        upstream = f" (upstream {self.upstream})" if self.upstream else ""
        return f"{self.hash[:12]} {self.subject}{upstream}"


def add_parser(commands: Any) -> None:
    """The ``bisect`` subcommand's options, on ``et-harness``'s subparsers."""
    cmd = commands.add_parser(
        "bisect",
        help="find the commit of a source tree where the selected tests change",
        description=__doc__.split("\n\n")[0],
    )
    cmd.add_argument("tree", type=Path, help="the ExecuTorch source tree (a git checkout)")
    cmd.add_argument("--good", help="a revision where the tests pass")
    cmd.add_argument("--bad", help="a revision where they fail")
    cmd.add_argument(
        "--find-fix",
        action="store_true",
        help="find the first good commit after bad ones (--bad older than --good)",
    )
    cmd.add_argument(
        "--step",
        action="store_true",
        help="test the tree as checked out and exit 0/1/125 (for git bisect run)",
    )
    cmd.add_argument("--device", default="host", help="the device profile (default: host)")
    cmd.add_argument(
        "--confirm",
        type=_confirm_count,
        default=2,
        metavar="N",
        help="before naming a commit, run it and the one before it N more times each; "
        f"any disagreement and the search goes on past it (0-{MAX_CONFIRM}, default: 2)",
    )
    cmd.add_argument("--json", type=Path, help="also write the result to this JSON file")


def _confirm_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = -1
    if not 0 <= count <= MAX_CONFIRM:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 0 to {MAX_CONFIRM}")
    return count


def run_bisect(args: argparse.Namespace, selection: list[str]) -> int:
    """Bisect (or one ``--step``); ``selection`` is what pytest is given (paths, -k ...)."""
    if not selection:
        raise BisectError("name the tests after '--', e.g. -- suites/test_module_lifetime.py")
    try:
        tree = expand_home(str(args.tree)).resolve()
    except ValueRuleError as exc:
        raise BisectError(f"the tree: {exc}") from None
    if args.step:
        return _one_step(tree, args, selection)
    if not args.good or not args.bad:
        raise BisectError("give --good REV and --bad REV (or --step for git bisect run)")
    old, new = (args.bad, args.good) if args.find_fix else (args.good, args.bad)
    wanted = GOOD if args.find_fix else BAD
    started = time.monotonic()
    commits = commits_between(tree, old, new, args.find_fix)
    from harness.runtime.source_tree import SourceRuntimeError, check_source, commit_of

    try:  # at the newer end: a tree none of whose commits could build stops here
        check_source(tree, commits[-1])
        old_end = commit_of(tree, old, "--bad" if args.find_fix else "--good")
    except SourceRuntimeError as exc:
        raise BisectError(str(exc)) from None
    check_selection(args.device, selection)
    new_side, old_side = ("good", "bad") if args.find_fix else ("bad", "good")
    ends = {commits[-1]: new_side, old_end: old_side}

    def test(commit: str) -> Step:
        step = run_step(tree, commit, args.device, selection)
        end = f" (the {ends[commit]} end)" if commit in ends else ""
        print(f"  {commit[:12]}{end}: {step.outcome}: {step.why}", flush=True)
        return step

    search = Search(commits, old_end, test, wanted, args.confirm)
    # The new end is tested first: a new end that behaves as the old one is a mistaken
    # range; one that cannot be tested is skipped and taken as the user says it is.
    end = search.run(len(commits) - 1)
    if end.outcome not in (wanted, UNTESTABLE):
        raise BisectError(
            f"{new} is {end.outcome}, not {wanted} ({end.why}): give a {wanted} revision "
            f"as --{'good' if args.find_fix else 'bad'}"
        )
    boundary = search.find()
    result = _result(tree, args, boundary, started, selection)
    for line in _lines(result):
        print(line)
    from harness.history.bisect_results import keep_bisect

    keep_bisect(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), "utf-8")
    return 1 if result["cannot_tell"] or result["undecided_among"] else 0


def _one_step(tree: Path, args: argparse.Namespace, selection: list[str]) -> int:
    """``--step``: the tests on the tree as checked out; the exit code as ``git bisect run``
    reads it (:data:`SKIP_EXIT`: cannot be tested, :data:`ABORT_EXIT`: stop)."""
    try:  # the tree is not checked: what it lacks may be this commit's, to be skipped
        check_selection(args.device, selection)
    except BisectError as exc:
        print(f"et-harness bisect: {exc}", file=sys.stderr)
        return ABORT_EXIT
    step = run_step(tree, None, args.device, selection)
    print(f"{step.outcome}: {step.why}")
    if step.outcome == UNTESTABLE:
        return SKIP_EXIT
    return int((step.outcome == BAD) != args.find_fix)


def _result(
    tree: Path,
    args: argparse.Namespace,
    boundary: Boundary,
    started: float,
    selection: list[str],
) -> dict[str, Any]:
    runs = boundary.runs
    # The difference that decided: the found commit's failure, or (--find-fix) that of the
    # newest bad commit before the fix. Its test is compared with the bad end's (runs[0]).
    bad_side = boundary.before if args.find_fix else boundary.found
    deciding = next((s for s in runs if s.commit == bad_side and s.outcome == BAD), None)
    differ = "" if args.find_fix else failing_tests(boundary, bad_side, runs[0].commit)
    return {
        "tree": str(tree),
        "device": args.device,
        "selection": selection,
        "find_fix": bool(args.find_fix),
        "good": args.good,
        "bad": args.bad,
        "confirm": args.confirm,
        "found": dataclasses.asdict(_commit(tree, boundary.found)),
        "undecided_among": [dataclasses.asdict(_commit(tree, c)) for c in boundary.undecided],
        "cannot_tell": [*boundary.unsure, *([differ] if differ else [])],
        "difference": f"{deciding.commit[:12]}: {deciding.why}" if deciding else "",
        "builds": len({s.commit for s in runs}),
        "runs": len(runs),
        "seconds": round(time.monotonic() - started, 1),
        "steps": [dataclasses.asdict(s) for s in runs],
        "skipped": [
            dataclasses.asdict(_commit(tree, c))
            for c in dict.fromkeys(s.commit for s in runs if s.outcome == UNTESTABLE)
        ],
        "finished": time.time(),
    }


def _lines(result: dict[str, Any]) -> list[str]:
    found = Commit(**result["found"])
    what = "first good" if result["find_fix"] else "first bad"
    lines = []
    if result["cannot_tell"]:
        lines.append(f"cannot tell the {what} commit: " + "; ".join(result["cannot_tell"]))
    if result["undecided_among"]:
        lines.append(
            f"{what} commit is one of these (the others could not be told): "
            + "; ".join(Commit(**c).line() for c in result["undecided_among"])
            + f"; or {found.line()}"
        )
    elif result["cannot_tell"]:
        lines.append(f"where the search stopped: {found.line()}")
    else:
        again = f" (confirmed: it and the one before it ran {1 + result['confirm']} times each)"
        lines.append(f"{what} commit: {found.line()}{again if result['confirm'] else ''}")
    if result["difference"]:
        lines.append(f"deciding difference: {result['difference']}")
    for skipped in result.get("skipped", []):
        lines.append(f"skipped (could not be tested): {Commit(**skipped).line()}")
    lines.append(f"{result['builds']} builds, {result['runs']} runs, {result['seconds']:.0f} s")
    return lines


def check_selection(device: str, selection: list[str]) -> None:
    """Refuse, before any build, a device or a selection no step could run: each step
    would only say "cannot tell" (``pytest --collect-only``, about a second)."""
    from harness.runtime.install_prefix import SDK_ENV
    from harness.runtime.source_tree import RUNTIME_ENV

    env = {k: v for k, v in os.environ.items() if k not in (RUNTIME_ENV, SDK_ENV)}
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", *selection,
            "--device", device, "-p", "no:cacheprovider"]  # fmt: skip
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, timeout=_STEP_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise BisectError(f"collecting the tests took over {_STEP_TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = _last_line(done.stderr.decode(errors="replace")) or _last_line(
            done.stdout.decode(errors="replace")
        )
        raise BisectError(
            f"the tests cannot run on {device} ({said or f'pytest exit code {done.returncode}'}); "
            "check --device and the tests after '--'"
        )


def run_step(tree: Path, commit: str | None, device: str, selection: list[str]) -> Step:
    """Run the selection on ``device`` with the runtime of ``tree`` at ``commit`` (as checked
    out when None); classify the outcome from the run's ``results.jsonl``."""
    from harness.runtime.source_tree import RUNTIME_ENV, SourceRuntimeError, check_source

    started = time.monotonic()
    named = f"{tree}@{commit}" if commit else str(tree)
    try:  # checked, not exported: the step's own run exports (and holds) what it builds
        check_source(tree, commit)  # a tree that is none: cannot tell, said plainly
    except SourceRuntimeError as exc:
        return Step(commit or "", UNTESTABLE, str(exc), time.monotonic() - started)
    with tempfile.TemporaryDirectory(prefix="et-bisect-") as results:
        env = dict(os.environ, **{RUNTIME_ENV: named, "ET_HARNESS_HISTORY": "off"})
        env.pop("ET_HARNESS_SDK", None)
        argv = [
            sys.executable, "-m", "pytest", *selection, "--device", device, "-x", "-q",
            "-p", "no:cacheprovider", "--results-dir", results,
        ]  # fmt: skip
        try:
            done = subprocess.run(
                argv, env=env, capture_output=True, timeout=_STEP_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            return Step(commit or "", UNTESTABLE, f"timed out after {_STEP_TIMEOUT_S} s", 0.0)
        records = _records(Path(results) / "results.jsonl")
        said = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        outcome, why = classify(records, done.returncode, said)
    failed = next((str(r["nodeid"]) for r in records if r.get("outcome") == "failed"), "")
    return Step(commit or "", outcome, why, round(time.monotonic() - started, 1), failed)


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def classify(records: list[dict[str, Any]], code: int, output: str) -> tuple[str, str]:
    """A step's outcome from its results: a failure is bad (its difference says why);
    an error or infrastructure outcome, or no test run, cannot tell; else good."""
    for record in records:
        if record.get("outcome") == "failed":
            return BAD, f"{record['nodeid']}: {_difference(record)}"
    for record in records:
        if record.get("outcome") in ("error", "infra"):
            why = record.get("infra") or _last_line(str(record.get("longrepr", "")))
            return UNTESTABLE, f"{record['nodeid']}: {record['outcome']}: {why}"
    passed = [r for r in records if r.get("outcome") == "passed"]
    if passed:
        return GOOD, f"{len(passed)} passed"
    skipped = [r for r in records if r.get("outcome") == "skipped"]
    if skipped:
        return UNTESTABLE, f"every test skipped: {_last_line(str(skipped[0].get('longrepr')))}"
    return UNTESTABLE, f"no test ran (pytest exit code {code}): {_last_line(output)}"


def _difference(record: dict[str, Any]) -> str:
    for verdict in record.get("verdicts", []):
        if not verdict.get("ok", True):
            return str(verdict.get("summary", ""))
    return _raised(str(record.get("longrepr", "")))


def _raised(longrepr: str) -> str:
    """The failure's exception line (pytest's ``E`` line, without the exception's name)
    and, for a checker's report ("...; the first:"), its headline and innermost frame
    (its function and file:line); else the last line."""
    lines = longrepr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("E ")), None)
    if start is None:
        return _last_line(longrepr)
    said = lines[start][1:].strip().split(": ", 1)[-1]
    if said.endswith("the first:") and len(lines) > start + 2:
        headline, frame = lines[start + 1].strip(), lines[start + 2].strip()
        at = f"{frame.split('(')[0].strip()} {frame[frame.rfind('(') :]}"  # name (file:line)
        said = f"{said.split('; the full report:')[0]}: {headline} at {at}"
    return said[:400]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def commits_between(tree: Path, old: str, new: str, find_fix: bool) -> list[str]:
    """The first-parent commits after ``old`` up to ``new`` that changed ``tree`` (a
    repository or a folder of one: a vendored tree), oldest first."""
    from harness.runtime.source_tree import SourceRuntimeError, commit_of

    old_option, new_option = ("--bad", "--good") if find_fix else ("--good", "--bad")
    try:
        old_hash = commit_of(tree, old, old_option)
        new_hash = commit_of(tree, new, new_option)
    except SourceRuntimeError as exc:
        raise BisectError(str(exc)) from None
    listed = _git(
        tree, "rev-list", "--first-parent", "--reverse", f"{old_hash}..{new_hash}", "--", "."
    )
    commits = listed.split()
    if not commits:
        raise BisectError(f"no commit after {old} up to {new} changed {tree}: is {old} older?")
    return commits


def _commit(tree: Path, commit: str) -> Commit:
    from harness.runtime.source_tree import upstream_of

    message = _git(tree, "log", "-1", "--format=%B", commit)
    return Commit(commit, message.splitlines()[0] if message else "", upstream_of(message))


def _git(tree: Path, *args: str) -> str:
    try:
        return git_text(tree, *args)
    except GitFailed as exc:
        raise BisectError(str(exc)) from None
