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
// (the runtime's rule), so this object keeps both together. release() plays
// a caller that frees its arrays once the runtime has taken what it needs: it
// overwrites every option with kReleasedKey / kReleasedValue, so a runtime that
// kept pointers into them delivers that poison, visibly, instead of the options.
class OwnedOptionsMap {
 public:
  static constexpr const char* kReleasedKey = "etb.released";
  static constexpr const char* kReleasedValue = "the caller overwrote this option after handing the map over";

  OwnedOptionsMap() = default;
  OwnedOptionsMap(const OwnedOptionsMap&) = delete;
  OwnedOptionsMap& operator=(const OwnedOptionsMap&) = delete;

  // Fills the map from backends[0..count). On a refused entry returns its
  // Error and sets *refused to its id.
  et::Error build(const etb_backend_t* backends, uint8_t count, std::string* refused);

  const et::LoadBackendOptionsMap& map() const { return map_; }

  // Overwrites every option the map's spans point to (the map's entries stay).
  void release();

 private:
  std::vector<et::BackendOption> options_;
  et::LoadBackendOptionsMap map_;
};

}  // namespace etb
