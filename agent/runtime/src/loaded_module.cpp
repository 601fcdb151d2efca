// SPDX-License-Identifier: BSD-3-Clause
#include "loaded_module.h"

#include <utility>

#include "elapsed.h"
#include "loaded_program.h"

namespace etb {

namespace {

using executorch::extension::module::Module;

StepResult result_of(et::Error error, const std::string& call) {
  if (error == et::Error::Ok) {
    return {};
  }
  return StepResult{error, call + " returned " + error_code(error)};
}

}  // namespace

LoadedModule::LoadedModule(const std::string& path) : path_(path), module_(path, Module::LoadMode::File) {}

StepResult LoadedModule::load(const OwnedOptionsMap& map, int64_t* us) {
  const Clock::time_point start = Clock::now();
#if ETB_HAS_MODULE_LOAD_MAP
  const et::Error error = module_.load(map.map(), et::Program::Verification::InternalConsistency);
#else
  (void)map;  // not served (agent.cpp)
  const et::Error error = et::Error::NotSupported;
#endif
  *us = micros_since(start);
  return result_of(error, "Module::load(map) of " + path_);
}

StepResult LoadedModule::load(int64_t* us) {
  const Clock::time_point start = Clock::now();
  const et::Error error = module_.load(et::Program::Verification::InternalConsistency);
  *us = micros_since(start);
  return result_of(error, "Module::load() of " + path_);
}

StepResult LoadedModule::delegate_ids(const std::string& method, std::vector<std::string>* out) {
  auto meta = module_.method_meta(method);
  if (!meta.ok()) {
    return StepResult{meta.error(), "program has no method \"" + method + "\": Module::method_meta returned " +
                                        error_code(meta.error())};
  }
  out->clear();
  for (size_t i = 0; i < meta->num_backends(); ++i) {
    auto name = meta->get_backend_name(i);
    if (!name.ok()) {
      return StepResult{name.error(),
                        "MethodMeta::get_backend_name(" + std::to_string(i) + ") returned " + error_code(name.error())};
    }
    out->emplace_back(*name);
  }
  return {};
}

StepResult LoadedModule::load_method(const std::string& method, std::unique_ptr<OwnedOptionsMap> map, int64_t* us) {
  explicit_maps_.push_back(std::move(map));
  OwnedOptionsMap& given = *explicit_maps_.back();
  const Clock::time_point start = Clock::now();
#if ETB_HAS_MODULE_LOAD_MAP && ETB_HAS_LOAD_METHOD_KERNEL_REGISTRY
  const et::Error error = module_.load_method(method, nullptr, nullptr, &explicit_maps_.back()->map(), {});
#elif ETB_HAS_MODULE_LOAD_MAP
  const et::Error error = module_.load_method(method, nullptr, nullptr, &explicit_maps_.back()->map());
#else
  const et::Error error = et::Error::NotSupported;  // not served (agent.cpp)
#endif
  *us = micros_since(start);
  // Released once the call returns (the method is initialised): its storage then
  // holds another model's map, which a method loaded lazily later must not see.
  given.release();
  return result_of(error, "Module::load_method(\"" + method + "\", map)");
}

StepResult LoadedModule::execute(const std::string& method, int64_t* us) {
  *us = 0;
  outputs_ = OutputFacts{};
  std::unique_ptr<MethodInputs>& inputs = inputs_[method];
  if (!inputs) {
    auto meta = module_.method_meta(method);
    if (!meta.ok()) {
      return StepResult{meta.error(), "program has no method \"" + method + "\": Module::method_meta returned " +
                                          error_code(meta.error())};
    }
    auto prepared = std::make_unique<MethodInputs>();
    const StepResult made = prepared->prepare(*meta, path_, method);
    if (!made.ok()) {
      return made;
    }
    inputs = std::move(prepared);
  }
  const Clock::time_point start = Clock::now();
  auto values = module_.execute(method, inputs->values());
  *us = micros_since(start);
  if (values.ok()) {
    outputs_ = describe_outputs(values->data(), values->size(), inputs.get());
  }
  return result_of(values.ok() ? et::Error::Ok : values.error(), "Module::execute(\"" + method + "\")");
}

}  // namespace etb
