# SPDX-License-Identifier: BSD-3-Clause
# The ExecuTorch runtime compiled from a source tree, for the device agent
# (included by agent/runtime/CMakeLists.txt when ETB_EXECUTORCH_SOURCE is set).
#
#   ETB_EXECUTORCH_SOURCE     the tree, as upstream lays it out (runtime/, schema/,
#                             extension/{module,data_loader,flat_tensor,named_data_map,
#                             memory_allocator}/, version.txt)
#   ETB_EXECUTORCH_GENERATED  where harness/runtime/source_tree.py put the schema headers
#                             (executorch/schema/*_generated.h and
#                             executorch/extension/flat_tensor/serialize/*_generated.h,
#                             made by the wheel's flatc) and root/executorch, a link to the
#                             tree so that <executorch/...> finds it
#   ETB_FLATBUFFERS_INCLUDE   the flatbuffers headers the tree pins (v24.3.25)
#
# It defines executorch::runtime (a static library: the runtime core, extension/module
# with its data loaders and data maps) as the wheel's package does, and no backend: the
# wheel's backend libraries are linked against the wheel's libexecutorch.so, whose
# registry and types they share, so they cannot be mixed with a core of another
# commit. The sources are taken from the tree by pattern, not from a list, so that any
# commit builds with what it has (files come and go: runtime/core/device_allocator.cpp).
# Each object is its own compile (no unity build): with a compiler launcher (ccache), a
# neighbouring commit recompiles only the files whose preprocessed text changed.

set(_et "${ETB_EXECUTORCH_SOURCE}")
foreach(_needed runtime/executor/program.cpp extension/module/module.cpp version.txt)
  if(NOT EXISTS "${_et}/${_needed}")
    message(FATAL_ERROR "ETB_EXECUTORCH_SOURCE=${_et} is not an ExecuTorch source tree (no ${_needed})")
  endif()
endforeach()

file(GLOB_RECURSE _etb_core_sources CONFIGURE_DEPENDS
  "${_et}/runtime/backend/*.cpp"
  "${_et}/runtime/core/*.cpp"
  "${_et}/runtime/executor/*.cpp"
  "${_et}/runtime/kernel/*.cpp"
  "${_et}/runtime/platform/*.cpp"
)
# Not the portable core: ATen-mode variants, other platforms' PALs, tests.
list(FILTER _etb_core_sources EXCLUDE REGEX "(/tensor_util_aten\\.cpp$|/tensor_parser_aten\\.cpp$|/test/|/testing_util/|/platform/default/)")
list(APPEND _etb_core_sources "${_et}/runtime/platform/default/posix.cpp")
file(GLOB _etb_extension_sources
  "${_et}/extension/module/module.cpp"
  "${_et}/extension/data_loader/file_data_loader.cpp"
  "${_et}/extension/data_loader/file_descriptor_data_loader.cpp"
  "${_et}/extension/data_loader/mmap_data_loader.cpp"
  "${_et}/extension/flat_tensor/flat_tensor_data_map.cpp"
  "${_et}/extension/flat_tensor/serialize/flat_tensor_header.cpp"
  "${_et}/extension/named_data_map/merged_data_map.cpp"
  "${_et}/extension/memory_allocator/cpu_caching_malloc_allocator.cpp"
  "${_et}/schema/extended_header.cpp"
)

add_library(etb_executorch_from_source STATIC ${_etb_core_sources} ${_etb_extension_sources})
set_target_properties(etb_executorch_from_source PROPERTIES UNITY_BUILD OFF POSITION_INDEPENDENT_CODE ON)
target_include_directories(etb_executorch_from_source SYSTEM PUBLIC
  "${ETB_EXECUTORCH_GENERATED}/root"
  "${ETB_EXECUTORCH_GENERATED}"
  "${ETB_FLATBUFFERS_INCLUDE}"
  "${_et}/runtime/core/portable_type/c10"
)
# The wheel's libraries are built with these (its package's INTERFACE definitions).
target_compile_definitions(etb_executorch_from_source PUBLIC C10_USING_CUSTOM_GENERATED_MACROS
  ETB_RUNTIME_FROM_SOURCE=1)
# ExecuTorch's code is compiled as upstream writes it: its warnings are not ours. (The
# optimization level is the agent's: agent/runtime/CMakeLists.txt.)
target_compile_options(etb_executorch_from_source PRIVATE -w)
find_package(Threads REQUIRED)
target_link_libraries(etb_executorch_from_source PUBLIC Threads::Threads ${CMAKE_DL_LIBS})
add_library(executorch::runtime ALIAS etb_executorch_from_source)

file(READ "${_et}/version.txt" executorch_VERSION)
string(STRIP "${executorch_VERSION}" executorch_VERSION)
list(LENGTH _etb_core_sources _etb_core_count)
list(LENGTH _etb_extension_sources _etb_extension_count)
message(STATUS "ExecuTorch ${executorch_VERSION} from source ${_et}: "
               "${_etb_core_count} core and ${_etb_extension_count} extension sources")
