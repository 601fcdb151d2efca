# SPDX-License-Identifier: BSD-3-Clause
# The operator kernels the ExecuTorch package ships, for what a program runs outside
# its delegates (included by CMakeLists.txt, which links and installs ETB_KERNEL_TARGETS).
#
# Upstream's executor_runner links its kernel libraries (optimized_native_cpu_ops_lib,
# else portable_ops_lib, plus quantized_ops_lib) whole, so that their static
# initializers register every operator with the runtime's registry at start-up. The
# package's component targets do the same for the shared libraries it ships: each
# carries the library with --no-as-needed. executorch::kernels_optimized holds the
# optimized kernels and the portable ones under them; executorch::kernels_quantized
# (opt-in in the package, for the Python plugin's sake, which the agent never loads)
# the quantized_decomposed operators.
#
# A package without kernel libraries still builds an agent: a program with an operator
# outside its delegates then fails to load, and the agent names the missing operator.
set(ETB_KERNEL_TARGETS)
foreach(_etb_kernels kernels_optimized kernels_quantized)
  if(TARGET executorch::${_etb_kernels})
    list(APPEND ETB_KERNEL_TARGETS executorch::${_etb_kernels})
  endif()
endforeach()
if(ETB_KERNEL_TARGETS)
  message(STATUS "et-agent links the kernel libraries: ${ETB_KERNEL_TARGETS}")
else()
  message(WARNING "the ExecuTorch package at ${executorch_DIR} ships no kernel library "
                  "(executorch::kernels_optimized, executorch::kernels_quantized): the agent "
                  "runs only programs whose operators are all inside delegates")
endif()
