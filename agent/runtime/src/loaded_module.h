// SPDX-License-Identifier: BSD-3-Clause
// A program loaded through extension::Module, the facade applications use.
#pragma once

#include <executorch/extension/module/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "method_io.h"
#include "owned_options_map.h"
#include "step_result.h"

namespace etb {

// Calls Module's own entry points, each timed; the agent decides which a load
// path uses. Never moved once created.
class LoadedModule {
 public:
  explicit LoadedModule(const std::string& path);
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  // Module::load(map): loads the program if needed and deep-copies the map.
  StepResult load(const OwnedOptionsMap& map, int64_t* us);
  // Module::load() without a map.
  StepResult load(int64_t* us);

  // The delegate ids of a method, in program order (the program must be loaded).
  StepResult delegate_ids(const std::string& method, std::vector<std::string>* out);

  // Module::load_method(method, nullptr, nullptr, &map), then the map released
  // (OwnedOptionsMap::release): its storage, kept as long as this object, then
  // holds another model's map.
  StepResult load_method(const std::string& method, std::unique_ptr<OwnedOptionsMap> map, int64_t* us);

  // Module::execute(method, inputs): loads the method first, without a map, if
  // it is not loaded; inputs as MethodInputs makes them (given
  // beside the program, or seeded).
  StepResult execute(const std::string& method, int64_t* us);

  bool has_method(const std::string& method) const { return module_.is_method_loaded(method); }

  // The outputs of the last execute, as describe_outputs describes them.
  const OutputFacts& outputs() const { return outputs_; }

 private:
  const std::string path_;
  std::vector<std::unique_ptr<OwnedOptionsMap>> explicit_maps_;
  std::map<std::string, std::unique_ptr<MethodInputs>> inputs_;
  OutputFacts outputs_;
  // Declared last: destroyed first, before the maps its methods may point into.
  executorch::extension::module::Module module_;
};

}  // namespace etb
