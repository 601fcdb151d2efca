// SPDX-License-Identifier: BSD-3-Clause
// A LoadBackendOptionsMap together with the option arrays its spans point to.
#pragma once

#include "tree_api.h"

#if __has_include(<executorch/runtime/backend/backend_options_map.h>)
#include <executorch/runtime/backend/backend_options_map.h>
#else
// A tree from before LoadBackendOptionsMap ("1/x"): a stand-in with its set_options, so
// that the agent compiles; no load path is served (ETB_HAS_LOAD_TIME_MAP is 0).
#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/span.h>
namespace executorch::runtime {
class LoadBackendOptionsMap {
 public:
  Error set_options(const char*, Span<BackendOption>) { return Error::NotSupported; }
};
}  // namespace executorch::runtime
#endif

#include <string>
#include <vector>

#include "etb/wire.h"

namespace etb {

namespace et = executorch::runtime;

// Built from one backend list of a request. The map does not own the arrays
// (the runtime's rule), so this object keeps both together. release() plays a
// caller that frees its map once the runtime has taken what it needs and whose
// memory then holds another model's map: the map object is destroyed and a new
// one built in its storage, over the same arrays, with the same ids and keys and
// every value changed (another_models_value). A runtime that kept a pointer to the
// map or into its arrays delivers those other values: a difference per option.
class OwnedOptionsMap {
 public:
  OwnedOptionsMap() = default;
  OwnedOptionsMap(const OwnedOptionsMap&) = delete;
  OwnedOptionsMap& operator=(const OwnedOptionsMap&) = delete;

  // Fills the map from backends[0..count). On a refused entry returns its
  // Error and sets *refused to its id.
  et::Error build(const etb_backend_t* backends, uint8_t count, std::string* refused);

  const et::LoadBackendOptionsMap& map() const { return map_; }

  // The map and its arrays released; their storage then holds another model's map
  // (same ids, keys and types; other values).
  void release();

 private:
  struct Entry {
    std::string id;
    size_t first;
    size_t count;
  };
  std::vector<et::BackendOption> options_;
  std::vector<Entry> entries_;
  et::LoadBackendOptionsMap map_;
};

}  // namespace etb
