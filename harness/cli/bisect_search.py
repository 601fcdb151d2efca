"""The search of ``et-harness bisect``: narrow the range to a boundary, then confirm it.

Bisection trusts each step: one run that fails by chance (a test whose outcome comes and
goes with the build's memory layout, a flaky one) moves the boundary onto an unrelated
commit. So before a commit is named, the boundary is tested again: the commit must come
out as it did (``confirm`` more runs, each the same), and so must the commit before it
(the old end included, which bisection alone never runs). A commit whose runs disagree
is *flaky*, skipped as one that cannot be tested, and the search goes on past it. When
the failing test at the boundary is not the one that failed at the bad end, the range
may hold two faults and the boundary may be the other one's: the search says so. Each
commit runs at most ``1 + confirm`` times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

GOOD, BAD, UNTESTABLE = "good", "bad", "cannot tell"
MAX_CONFIRM = 10  # re-runs of each side of the boundary (--confirm)
_OLD_END = -1  # the index of the old end (--good; --bad with --find-fix), before commits[0]


@dataclasses.dataclass(frozen=True)
class Step:
    """One run of the tests at a commit: its outcome and why (the deciding difference, or
    the reason), and the failing test's node id when it is bad."""

    commit: str
    outcome: str  # GOOD, BAD or UNTESTABLE
    why: str
    seconds: float
    test: str = ""


@dataclasses.dataclass(frozen=True)
class Boundary:
    """Where the search ended: the commit it names, and why it may not be sure."""

    found: str  # the first commit of the wanted outcome
    before: str  # the commit before it (the old end when found is the first)
    undecided: tuple[str, ...]  # commits between the two that could not be told
    unsure: tuple[str, ...]  # why the boundary cannot be trusted; empty: it was confirmed
    runs: tuple[Step, ...]  # every run, in order, repeats included


class Search:
    """One search over ``commits`` (oldest first; ``old_end`` before them) for the first
    commit whose outcome is ``wanted``, ``test`` running one commit. The caller runs the
    new end first (:meth:`run`), to refuse a mistaken range before :meth:`find`."""

    def __init__(
        self,
        commits: list[str],
        old_end: str,
        test: Callable[[str], Step],
        wanted: str,
        confirm: int,
    ) -> None:
        self.commits, self.old_end, self.test = commits, old_end, test
        self.wanted = wanted
        self.unwanted = GOOD if wanted == BAD else BAD
        self.confirm = confirm
        self.runs: dict[str, list[Step]] = {}
        self.order: list[Step] = []
        self.confirmed: set[int] = set()

    def commit(self, index: int) -> str:
        return self.old_end if index == _OLD_END else self.commits[index]

    def run(self, index: int) -> Step:
        step = self.test(self.commit(index))
        self.runs.setdefault(self.commit(index), []).append(step)
        self.order.append(step)
        return step

    def state(self, index: int) -> str | None:
        """GOOD or BAD if every run that told agreed; UNTESTABLE if none told or they
        disagreed (flaky); None if never run."""
        runs = self.runs.get(self.commit(index))
        if not runs:
            return None
        told = {step.outcome for step in runs if step.outcome != UNTESTABLE}
        return told.pop() if len(told) == 1 else UNTESTABLE

    def find(self) -> Boundary:
        """Narrow, confirm each side of the boundary, and narrow again past what flaked."""
        low, high = _OLD_END, len(self.commits) - 1
        unsure: list[str] = []
        while True:
            low, high = self._narrow(low, high)
            if not self._holds(high, self.wanted):
                newer = [i for i in range(high + 1, len(self.commits))
                         if self.state(i) == self.wanted]  # fmt: skip
                if not newer:
                    unsure.append(self._flaked(high, self.wanted))
                    break
                high = newer[0]
                continue
            if not self._holds(low, self.unwanted):
                if low == _OLD_END:
                    unsure.append(self._flaked(low, self.unwanted))
                    break
                older = [i for i in range(_OLD_END + 1, low) if self.state(i) == self.unwanted]
                low = older[-1] if older else _OLD_END
                continue
            break
        undecided = tuple(self.commits[i] for i in range(low + 1, high) if self.state(i))
        flaky = [c for c in undecided if len({s.outcome for s in self.runs[c]} - {UNTESTABLE}) > 1]
        if flaky:
            unsure.append(
                f"{len(flaky)} commit(s) before it gave different outcomes on re-runs "
                f"({', '.join(c[:12] for c in flaky)}): a test whose outcome varies between "
                "runs or builds shares the range"
            )
        return Boundary(
            self.commit(high), self.commit(low), undecided, tuple(unsure), tuple(self.order)
        )

    def _narrow(self, low: int, high: int) -> tuple[int, int]:
        """Bisect between ``low`` and ``high`` over the commits not run yet."""
        while high - low > 1:
            untried = [i for i in range(low + 1, high) if self.state(i) is None]
            if not untried:
                break
            middle = min(untried, key=lambda i: (abs(i - (low + high) / 2), i))
            outcome = self.run(middle).outcome
            if outcome == self.wanted:
                high = middle
            elif outcome == self.unwanted:
                low = middle
        return low, high

    def _holds(self, index: int, outcome: str) -> bool:
        """Whether ``index`` comes out ``outcome`` on ``confirm`` more runs (once each)."""
        if index in self.confirmed:
            return True
        if self.state(index) is None:
            self.run(index)
        for _ in range(self.confirm):
            if self.state(index) != outcome:
                break
            self.run(index)
        if self.state(index) != outcome:
            return False
        self.confirmed.add(index)
        return True

    def _flaked(self, index: int, outcome: str) -> str:
        """Why ``index`` cannot be a side of the boundary: its runs, in order."""
        runs = self.runs[self.commit(index)]
        said = "; ".join(f"{step.outcome}: {step.why}" for step in runs)
        side = "old" if index == _OLD_END else "new"
        end = f"the {side} end " if index in (_OLD_END, len(self.commits) - 1) else ""
        commit = self.commit(index)[:12]
        return f"{end}{commit} did not come out {outcome} on each of {len(runs)} run(s) ({said})"


def failing_tests(boundary: Boundary, bad_side: str, bad_end: str) -> str:
    """A sentence if the test failing at ``bad_side`` (the boundary's failing commit) is not
    the one that failed first at ``bad_end``; empty when they agree or one is unknown."""
    first: dict[str, str] = {}
    for step in boundary.runs:
        if step.outcome == BAD and step.test:
            first.setdefault(step.commit, step.test)
    here, there = first.get(bad_side), first.get(bad_end)
    if not here or not there or here == there or bad_side == bad_end:
        return ""
    return (
        f"the failing test at {bad_side[:12]} ({here}) is not the one that failed at the bad "
        f"end {bad_end[:12]} ({there}): the range may hold another fault; bisect that test "
        f"alone (-- {there})"
    )
