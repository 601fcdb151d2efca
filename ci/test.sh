#!/usr/bin/env bash
# The project's tests, then the device suites on every emulated device.
# Run after ci/setup.sh. Exits non-zero if any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTEST=(.venv/bin/python -m pytest -p no:cacheprovider)

echo "== project tests (tests/)"
"${PYTEST[@]}" tests -q
echo "== device suites on host"
"${PYTEST[@]}" suites -q --device host
echo "== device suites on ssh-emu (OpenSSH in a netns, arm64 runtime under qemu-user)"
"${PYTEST[@]}" suites -q --device ssh-emu
echo "== device suites on adb-emu (real adb client, arm64 runtime under qemu-user)"
"${PYTEST[@]}" suites -q --device adb-emu
