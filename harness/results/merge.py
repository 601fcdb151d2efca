"""Merge many runs' results into one: ``python -m harness.results.merge OUT INPUT...``.

Each INPUT is a ``results.jsonl`` file or a directory searched for them (e.g.
the downloaded artifacts of every device job of a nightly run). OUT receives
the combined ``results.jsonl`` and one ``report.html`` (with a per-board table for
lab places); artifact paths are rewritten to stay valid from OUT. The device x outcome
table is printed, and the per-board one.
Exit status: 0, or 2 when no results were found.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.results.boards import board_lines
from harness.results.directory import REPORT_FILE, RESULTS_FILE, ResultsWriter, read_results
from harness.results.html_report import write_report
from harness.results.records import CaseResult
from harness.results.summary import outcome_table, quarantined_devices


def find_results(inputs: Sequence[Path]) -> list[Path]:
    """Every results file named by or found under ``inputs``, in a stable order."""
    found: list[Path] = []
    for item in inputs:
        if item.is_dir():
            found += sorted(item.rglob(RESULTS_FILE))
        elif item.is_file():
            found.append(item)
        else:
            raise FileNotFoundError(f"{item}: no such file or directory")
    return list(dict.fromkeys(p.resolve() for p in found))


def merge(inputs: Sequence[Path], out_dir: Path) -> list[CaseResult]:
    """Write OUT/results.jsonl and OUT/report.html from ``inputs``; return the results."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out_file = (out_dir / RESULTS_FILE).resolve()
    merged: list[CaseResult] = []
    for path in find_results(inputs):
        if path == out_file:
            continue
        run_dir = os.path.relpath(path.parent, out_dir.resolve()).replace(os.sep, "/")
        if ":" in run_dir.split("/", 1)[0]:  # "nightly:1/..." would read as a URL scheme
            run_dir = f"./{run_dir}"
        for result in read_results(path):
            merged.append(
                dataclasses.replace(
                    result,
                    run=result.run or path.parent.name,
                    artifacts=tuple(f"{run_dir}/{a}" for a in result.artifacts),
                )
            )
    out_file.unlink(missing_ok=True)
    writer = ResultsWriter(out_file)
    for result in merged:
        writer.write(result)
    writer.close()
    if writer.unwritten:
        raise OSError(f"{out_file}: {writer.unwritten} results not written ({writer.error})")
    write_report(out_dir / REPORT_FILE, merged, out_dir, title="ExecuTorch device farm: merged")
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.results.merge", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("out", type=Path, help="directory for the merged results and report")
    parser.add_argument(
        "inputs", type=Path, nargs="+", help="results.jsonl files, or directories holding them"
    )
    args = parser.parse_args(argv)
    try:
        results = merge(args.inputs, args.out)
    except (OSError, ValueError) as exc:
        print(f"merge: {exc}", file=sys.stderr)
        return 2
    if not results:
        print(f"merge: no results in {', '.join(map(str, args.inputs))}", file=sys.stderr)
        return 2
    print("\n".join(outcome_table(results)))
    per_board = board_lines(results)
    if per_board:
        print("\n".join(["per board (lab place):", *per_board]))
    for device, reason in quarantined_devices(results).items():
        print(f"quarantined: {device}: {reason}")
    print(
        f"merged {len(results)} results into {args.out / RESULTS_FILE} and {args.out / REPORT_FILE}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
