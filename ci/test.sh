#!/usr/bin/env bash
# Style checks (ruff lint and format, mypy), the project's tests, then the device suites on
# every emulated device at once (ci/run-emulated.sh: host, ssh-emu, adb-emu, mcu-emu,
# mcu-m55-emu in parallel, with reports) and, beside them, the concurrent multi-model cases
# on the host agent under each race detector (ci/run-race-detectors.sh). Every step runs;
# the exit status is non-zero if any failed.
# Run after ci/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# Many tests run pytest in a subprocess (the fault injection, the kill tests, ...): with
# bytecode written, the first caches the compiled, assertion-rewritten modules and the
# rest read them (ci/setup.sh installs without byte-compiling).
unset PYTHONDONTWRITEBYTECODE
# No run history unless one is named ($ET_HARNESS_HISTORY): a fresh CI machine has none to
# compare with, and the device suites' runs would draw trends of each other (the nightly
# job keeps the history, .github/workflows/nightly.yml).
export ET_HARNESS_HISTORY="${ET_HARNESS_HISTORY:-off}"
mkdir -p results
status=0

echo "== ruff (rules in pyproject.toml)"
.venv/bin/ruff check harness tests suites conftest.py || status=$?
.venv/bin/ruff format --check harness tests suites conftest.py || status=$?
# mypy takes one core for ~10 s: it runs while the project tests start; its output
# comes after theirs.
# mypy: the files pyproject.toml names (harness/, suites/, tests/).
.venv/bin/mypy > results/ci-mypy.log 2>&1 &
mypy=$!
echo "== project tests (tests/)"
# Four workers on two cores: a third of the tests' time is spent waiting (for a timeout
# under test, a QEMU board, a coordinator, a lab's reservation), which the others fill
# (measured with a warm cache: 316 s on three workers, 292 s on four). Each worker takes
# whole modules, the longest first (tests/conftest.py, LONGEST_FIRST): a module's fixtures
# (a labgrid lab, a shim's runs) are made once, and the workers end together (from an
# empty cache: 369 s, against 419-477 s with xdist's test-by-test default).
# The sweep over ExecuTorch's history (tests marked nightly) runs in .github/workflows/nightly.yml.
.venv/bin/python -m pytest tests -q -p no:cacheprovider -n 4 -m "not nightly" \
  --dist loadscope --no-loadscope-reorder --durations=15 || status=$?  # --durations: where the time goes
echo "== mypy (settings in pyproject.toml)"
wait "$mypy" || status=$?
cat results/ci-mypy.log
# The emulated devices and the race detectors run at once (each leaves a core idle while
# it collects and brings up its devices: 67 s against 77 s one after the other with a warm
# cache); their outputs follow, in turn, when both ended.
bash ci/run-emulated.sh results/ci > results/ci-emulated.log 2>&1 &
emulated=$!
bash ci/run-race-detectors.sh results/ci-races > results/ci-races.log 2>&1 &
races=$!
wait "$emulated" || status=$?
wait "$races" || status=$?
echo "== device suites on every emulated device (suites/)"
cat results/ci-emulated.log
echo "== concurrent multi-model cases under the race detectors (host-tsan, host-helgrind, host-drd)"
cat results/ci-races.log
exit "$status"
