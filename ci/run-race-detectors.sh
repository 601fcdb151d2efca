#!/usr/bin/env bash
# The host agent's concurrent multi-model cases (suites/test_models.py, and the real
# XNNPACK program in suites/test_concurrent_xnnpack.py) under each race detector
# (docs/agent.md, "Race detectors"): host-tsan (the agent's ThreadSanitizer build),
# host-helgrind and host-drd (valgrind), each device on an xdist worker of its own. A
# race report that agent/runtime/race-suppressions.yaml does not explain fails its test;
# each test's report is kept under RESULTS_DIR/artifacts/<device>/<test>/try-N/.
# valgrind's memcheck (host-memcheck) is not run here: at ~33x it is left to the nightly
# workflow (.github/workflows/nightly.yml; figures in docs/performance.md, "Memcheck").
#
# Usage: ci/run-race-detectors.sh [RESULTS_DIR] [extra pytest arguments]
# Environment: DETECTORS (default host-tsan,host-helgrind,host-drd),
# SELECTION (pytest -k, default below), RUN_TIMEOUT seconds (default 600).
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-results/race-detectors}"
shift || true
devices="${DETECTORS:-host-tsan,host-helgrind,host-drd}"
IFS=, read -r -a listed <<<"$devices"

# The cases that load models on threads of their own; not the two that skip on every host
# agent (it holds as many models as the wire carries, and it has threads), which would
# start an agent under each detector only to read its HELLO (0.8 s of CPU under valgrind).
selection="concurrent and not more_models_than_announced and not refused_by_a_device_without_threads"

started=$(date +%s)
status=0
.venv/bin/python -m pytest suites/test_models.py suites/test_concurrent_xnnpack.py \
  -p no:cacheprovider -q \
  -k "${SELECTION:-$selection}" --device "$devices" -n "${#listed[@]}" \
  --run-timeout "${RUN_TIMEOUT:-600}" \
  --results-dir "$results" --junitxml "$results/junit.xml" "$@" || status=$?
echo "== race detectors: $devices in $(( $(date +%s) - started )) s (exit $status)"
exit "$status"
