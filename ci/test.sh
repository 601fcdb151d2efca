#!/usr/bin/env bash
# Style checks (ruff lint and format, mypy), the project's tests, then the device suites on
# every emulated device at once (ci/run-emulated.sh: host, ssh-emu, adb-emu, mcu-emu in parallel, with reports),
# then the concurrent multi-model cases on the host agent under each race detector
# (ci/run-race-detectors.sh).
# Run after ci/setup.sh. Exits non-zero if any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# Many tests run pytest in a subprocess (the fault injection, the kill tests, ...): with
# bytecode written, the first caches the compiled, assertion-rewritten modules and the
# rest read them (ci/setup.sh installs without byte-compiling).
unset PYTHONDONTWRITEBYTECODE

echo "== ruff (rules in pyproject.toml)"
.venv/bin/ruff check harness tests suites
.venv/bin/ruff format --check harness
echo "== mypy (settings in pyproject.toml)"
.venv/bin/mypy harness
echo "== project tests (tests/)"
# Three workers on two cores: a fifth of the tests' time is spent waiting (for a timeout
# under test, a QEMU board, a coordinator), which a third worker fills.
.venv/bin/python -m pytest tests -q -p no:cacheprovider -n 3 --durations=15  # where the time goes
echo "== device suites on every emulated device (suites/)"
bash ci/run-emulated.sh results/ci
echo "== concurrent multi-model cases under the race detectors (host-tsan, host-helgrind, host-drd)"
bash ci/run-race-detectors.sh results/ci-races
