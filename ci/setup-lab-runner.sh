#!/usr/bin/env bash
# A lab runner's setup: only what the named pools need (run as root on Debian 12).
#
#   bash ci/setup-lab-runner.sh DEVICES_DIR POOL[,POOL...]
#
# The harness goes into .venv with the [lab] and [history] extras (labgrid's client, and
# psycopg for a lab's PostgreSQL history) and nothing else; then `et-harness doctor
# --packages` names the Debian packages the pools' device kinds need on this machine
# (none for a serial board, the agent's build tools for an SSH one, adb for a phone) and
# only those are installed. No compilers for other targets, no emulators, no browser, no
# database server (ci/setup.sh is the developer's and CI's full set).
set -euo pipefail
usage="usage: ci/setup-lab-runner.sh DEVICES_DIR POOL[,POOL...]"
devices_dir=$(realpath "${1:?$usage}")
pools=${2:?$usage}
cd "$(dirname "$0")/.."
base=(python3 python3-venv libpq5)  # the harness; psycopg's libpq
source ci/apt-missing.sh
install_missing "${base[@]}"
if [[ ! -x .venv/bin/python ]] || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  python3 -m venv --clear .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -c ci/constraints.txt uv
uv=(.venv/bin/uv pip install -q --python .venv/bin/python -c ci/constraints.txt)
"${uv[@]}" --build-constraints ci/constraints.txt -e '.[lab,history]' hatchling
# labgrid's pyserial-labgrid shares pyserial's files; stock pyserial goes last (ci/setup.sh)
"${uv[@]}" --reinstall --no-deps 'pyserial==3.5'
IFS=, read -ra names <<<"$pools"
profiles=""  # paths: no folder lookup needed
for name in "${names[@]}"; do profiles+="$devices_dir/$name.yaml,"; done
mapfile -t needed < <(.venv/bin/et-harness doctor --packages --device "${profiles%,}")
install_missing "${needed[@]}"
echo "ci/setup-lab-runner.sh: ready for ${pools} (${needed[*]:-no Debian packages})"
