#include "loaded_module.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "loaded_program.h"

namespace etb {

namespace {

using Clock = std::chrono::steady_clock;
using executorch::extension::module::Module;

int64_t micros_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

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
  const et::Error error = module_.load(map.map(), et::Program::Verification::InternalConsistency);
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
    return StepResult{meta.error(), "program has no method \"" + method + "\": Module::method_meta returned " + error_code(meta.error())};
  }
  out->clear();
  for (size_t i = 0; i < meta->num_backends(); ++i) {
    auto name = meta->get_backend_name(i);
    if (!name.ok()) {
      return StepResult{name.error(), "MethodMeta::get_backend_name(" + std::to_string(i) + ") returned " + error_code(name.error())};
    }
    out->emplace_back(*name);
  }
  return {};
}

StepResult LoadedModule::load_method(const std::string& method, std::unique_ptr<OwnedOptionsMap> map, int64_t* us) {
  explicit_maps_.push_back(std::move(map));
  const Clock::time_point start = Clock::now();
  const et::Error error = module_.load_method(method, nullptr, nullptr, &explicit_maps_.back()->map());
  *us = micros_since(start);
  return result_of(error, "Module::load_method(\"" + method + "\", map)");
}

StepResult LoadedModule::execute(const std::string& method, int64_t* us) {
  const Clock::time_point start = Clock::now();
  auto outputs = module_.execute(method);
  *us = micros_since(start);
  outputs_.clear();
  if (outputs.ok()) {
    for (const et::EValue& output : *outputs) {
      if (!output.isTensor() || output.toTensor().scalar_type() != executorch::aten::ScalarType::Float) {
        continue;
      }
      const executorch::aten::Tensor tensor = output.toTensor();
      const float* data = tensor.const_data_ptr<float>();
      outputs_ += outputs_.empty() ? "" : ";";
      for (ssize_t j = 0; j < tensor.numel(); ++j) {
        char number[32];
        snprintf(number, sizeof(number), j ? ",%g" : "%g", static_cast<double>(data[j]));
        outputs_ += number;
      }
    }
  }
  return result_of(outputs.ok() ? et::Error::Ok : outputs.error(), "Module::execute(\"" + method + "\")");
}

}  // namespace etb
