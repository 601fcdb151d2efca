# SPDX-License-Identifier: BSD-3-Clause
# Cross-compiles the device agent for arm64 Linux (glibc) with Debian's
# g++-aarch64-linux-gnu, against the executorch manylinux_2_28_aarch64 wheel.
#
#   cmake -S agent/runtime -B build-arm64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=agent/cmake/aarch64-linux-gnu.cmake \
#         -Dexecutorch_DIR=<aarch64 sdk>/share/cmake
#
# Run the result without a board: qemu-aarch64 -L /usr/aarch64-linux-gnu ./et-agent
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(ETB_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${ETB_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${ETB_CROSS_TRIPLE}-g++)

# Libraries and headers of the target come from the cross sysroot; programs
# (none are run at build time) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${ETB_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# The executorch package is found through executorch_DIR, outside the sysroot.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
