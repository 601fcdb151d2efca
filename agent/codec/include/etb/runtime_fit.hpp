// SPDX-License-Identifier: BSD-3-Clause
/*
 * etb/runtime_fit.hpp - the wire's limits against the ExecuTorch tree's own (C++17).
 *
 * Not part of the C codec: a header for the C++ code that copies decoded options into
 * the runtime's types (the hosted agent's runtime_options.cpp, the firmware's
 * options.cpp). It fails the build, naming both figures, when a tree cannot hold what
 * the wire lets through: a 63-byte key (ETB_MAX_KEY) and its NUL in
 * kMaxOptionKeyLength, a 255-byte string (ETB_MAX_STRING) and its NUL in
 * kMaxOptionValueLength, 8 backends (ETB_MAX_LOAD_BACKENDS) in a
 * LoadBackendOptionsMap's kMaxBackends. A tree without a load-time map has no
 * kMaxBackends to check.
 */
#ifndef ETB_RUNTIME_FIT_HPP
#define ETB_RUNTIME_FIT_HPP

#include <stddef.h>

#include <executorch/runtime/backend/options.h>

#include "etb/wire.h"

static_assert(ETB_MAX_KEY + 1u <= executorch::runtime::kMaxOptionKeyLength,
              "the wire's 63-byte keys (ETB_MAX_KEY) and their NUL do not fit this tree's "
              "kMaxOptionKeyLength: the copy into BackendOption::key would overrun it");
static_assert(ETB_MAX_STRING + 1u <= executorch::runtime::kMaxOptionValueLength,
              "the wire's 255-byte strings (ETB_MAX_STRING) and their NUL do not fit this "
              "tree's kMaxOptionValueLength: the copy into a string option would overrun it");

#if __has_include(<executorch/runtime/backend/backend_options_map.h>)
#include <executorch/runtime/backend/backend_options_map.h>

namespace etb {
namespace runtime_fit {

/* LoadBackendOptionsMap::kMaxBackends is private. An explicit instantiation may name a
   private member ([temp.explicit]: access is not checked there), so this template hands
   its address to a friend function that a constant expression can read it through. */
constexpr const size_t* map_capacity();

template <const size_t* Capacity>
struct MapCapacity {
  friend constexpr const size_t* map_capacity() { return Capacity; }
};
template struct MapCapacity<&executorch::runtime::LoadBackendOptionsMap::kMaxBackends>;

static_assert(ETB_MAX_LOAD_BACKENDS <= *map_capacity(),
              "a LOAD carries up to 8 backends (ETB_MAX_LOAD_BACKENDS), more than this tree's "
              "LoadBackendOptionsMap::kMaxBackends holds: set_options would refuse the last");

}  // namespace runtime_fit
}  // namespace etb
#endif

#endif /* ETB_RUNTIME_FIT_HPP */
