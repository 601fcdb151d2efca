#!/usr/bin/env bash
# A nightly's report (the report job of .github/workflows/nightly.yml and lab-nightly.yml):
#
#   bash ci/nightly-report.sh RESULTS_DIR OUT_DIR
#
# merges every job's results under RESULTS_DIR into OUT_DIR (results.jsonl, report.html with
# its per-board table, summary.txt), adds every job's run to the run history
# ($ET_HARNESS_HISTORY: a postgresql:// URL or an SQLite file) and writes history.html,
# history.json and night.txt, one short summary of the night across every job (counts,
# the new failures, the new infra per device and place). With $GITHUB_STEP_SUMMARY set,
# the merge's tables and the night's summary go there too.
set -euo pipefail
results=${1:?usage: ci/nightly-report.sh RESULTS_DIR OUT_DIR}
out=${2:?usage: ci/nightly-report.sh RESULTS_DIR OUT_DIR}
summary=${GITHUB_STEP_SUMMARY:-/dev/null}
mkdir -p "$out"
python -m harness.results.merge "$out" "$results" | tee "$out/summary.txt" || true
test -s "$out/results.jsonl"
python -m harness.cli history --catch-up "$results" --night --html "$out/history.html" \
  | tee "$out/night.txt"
python -m harness.cli history --json > "$out/history.json"
{ echo '```'; cat "$out/summary.txt" "$out/night.txt"; echo '```'; } >> "$summary"
