#!/usr/bin/env bash
# Every emulated device at once: the harness brings up each profile tagged
# 'emulated' (host, ssh-emu, adb-emu, mcu-emu, mcu-m55-emu ...: it starts their emulators
# itself) and runs the device suites on all of them, one device per xdist worker.
#
# Usage: ci/run-emulated.sh [RESULTS_DIR] [extra pytest arguments]
# Writes RESULTS_DIR (default results/emulated): results.jsonl, report.html,
# junit.xml, run.json. Exits non-zero if any test failed or hit device trouble.
# Environment: WORKERS (default one per emulated device: with fewer, the last device
# starts when another ends, and the run waits for it alone), RUN_TIMEOUT seconds
# (default 3000).
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-results/emulated}"
shift || true

devices=$(
  .venv/bin/python - <<'PY'
from harness.farm.selection import select_profiles
for profile in select_profiles("tag:emulated"):
    print(f"  {profile.name:<12} {profile.kind:<7} {profile.description}")
PY
)
echo "== emulated devices:"
echo "$devices"

exec .venv/bin/python -m pytest suites -p no:cacheprovider -q \
  --device tag:emulated -n "${WORKERS:-$(grep -c . <<<"$devices")}" \
  --run-timeout "${RUN_TIMEOUT:-3000}" \
  --results-dir "$results" --junitxml "$results/junit.xml" "$@"
