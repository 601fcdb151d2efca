// SPDX-License-Identifier: BSD-3-Clause
#include "loaded_program.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "elapsed.h"

namespace etb {

namespace {

StepResult fail(et::Error error, std::string message) { return StepResult{error, std::move(message)}; }

}  // namespace

std::string error_code(et::Error error) {
  char text[16];
  snprintf(text, sizeof(text), "0x%02x", static_cast<unsigned>(error));
  return text;
}

StepResult LoadedProgram::open(const std::string& path, int64_t* open_us) {
  const Clock::time_point start = Clock::now();
  const StepResult result = open_file(path);
  *open_us = micros_since(start);
  return result;
}

StepResult LoadedProgram::open_file(const std::string& path) {
  path_ = path;
  auto loader = executorch::extension::FileDataLoader::from(path.c_str());
  if (!loader.ok()) {
    return fail(loader.error(),
                "cannot open program " + path + ": FileDataLoader::from returned " + error_code(loader.error()));
  }
  loader_ = std::make_unique<executorch::extension::FileDataLoader>(std::move(*loader));
  auto program = et::Program::load(loader_.get(), et::Program::Verification::InternalConsistency);
  if (!program.ok()) {
    return fail(program.error(), "Program::load of " + path + " returned " + error_code(program.error()));
  }
  program_.emplace(std::move(*program));
  return {};
}

StepResult LoadedProgram::delegate_ids(const std::string& method, std::vector<std::string>* out) const {
  auto meta = program_->method_meta(method.c_str());
  if (!meta.ok()) {
    return fail(meta.error(),
                "program has no method \"" + method + "\": method_meta returned " + error_code(meta.error()));
  }
  out->clear();
  for (size_t i = 0; i < meta->num_backends(); ++i) {
    auto name = meta->get_backend_name(i);
    if (!name.ok()) {
      return fail(name.error(),
                  "MethodMeta::get_backend_name(" + std::to_string(i) + ") returned " + error_code(name.error()));
    }
    out->emplace_back(*name);
  }
  return {};
}

StepResult LoadedProgram::load_method(const std::string& name, std::unique_ptr<OwnedOptionsMap> map, int64_t* load_us) {
  *load_us = 0;
  if (has_method(name)) {
    return {};  // as Module::load_method does: a loaded method is not initialised again
  }
  auto meta = program_->method_meta(name.c_str());
  if (!meta.ok()) {
    return fail(meta.error(), "program has no method \"" + name + "\"");
  }
  auto loaded = std::make_unique<LoadedMethod>();
  loaded->name = name;
  loaded->map = std::move(map);
  size_t planned = 0;
  for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
    auto size = meta->memory_planned_buffer_size(i);
    if (!size.ok() || *size < 0) {
      return fail(size.ok() ? et::Error::InvalidProgram : size.error(), "bad memory-planned buffer size in program");
    }
    // A program is untrusted: what it asks for is bounded before it is allocated.
    if (static_cast<uint64_t>(*size) > kMaxPlannedBytes - planned) {
      return fail(et::Error::MemoryAllocationFailed, "method \"" + name + "\" plans more than " +
                                                         std::to_string(kMaxPlannedBytes >> 20) +
                                                         " MiB of memory, the agent's bound");
    }
    planned += static_cast<size_t>(*size);
    loaded->planned_buffers.emplace_back(static_cast<size_t>(*size));
    loaded->planned_spans.emplace_back(loaded->planned_buffers.back().data(), loaded->planned_buffers.back().size());
  }
  loaded->planned_memory.emplace(
      et::Span<et::Span<uint8_t>>(loaded->planned_spans.data(), loaded->planned_spans.size()));
  loaded->memory_manager.emplace(&method_allocator_, &*loaded->planned_memory, &temp_allocator_);

  const Clock::time_point start = Clock::now();
#if ETB_HAS_LOAD_TIME_MAP
  auto method = program_->load_method(name.c_str(), &*loaded->memory_manager, nullptr, nullptr, &loaded->map->map());
#else
  auto method = program_->load_method(name.c_str(), &*loaded->memory_manager);  // not served (agent.cpp)
#endif
  *load_us = micros_since(start);
  if (!method.ok()) {
    return fail(method.error(), "Program::load_method(\"" + name + "\") returned " + error_code(method.error()));
  }
  loaded->method.emplace(std::move(*method));
  methods_.emplace(name, std::move(loaded));
  return {};
}

StepResult LoadedProgram::set_inputs(LoadedMethod& loaded) {
  if (!loaded.inputs) {
    auto meta = program_->method_meta(loaded.name.c_str());
    if (!meta.ok()) {
      return fail(meta.error(), "program has no method \"" + loaded.name + "\"");
    }
    auto inputs = std::make_unique<MethodInputs>();
    const StepResult prepared = inputs->prepare(*meta, path_, loaded.name);
    if (!prepared.ok()) {
      return prepared;
    }
    loaded.inputs = std::move(inputs);
  }
  const std::vector<et::EValue>& values = loaded.inputs->values();
  for (size_t i = 0; i < values.size(); ++i) {
    const et::Error error = loaded.method->set_input(values[i], i);
    if (error != et::Error::Ok) {
      return fail(error, "Method::set_input(" + std::to_string(i) + ") returned " + error_code(error));
    }
  }
  return {};
}

OutputFacts LoadedProgram::outputs(const std::string& name) const {
  auto found = methods_.find(name);
  if (found == methods_.end()) {
    return {};
  }
  const et::Method& method = *found->second->method;
  // Method::get_output aborts the process on an output that names no value (a
  // damaged program); MethodMeta::output_tag checks the index and says so.
  auto meta = program_->method_meta(name.c_str());
  std::vector<et::EValue> outputs;
  for (size_t i = 0; i < method.outputs_size(); ++i) {
    if (!meta.ok() || !meta->output_tag(i).ok()) {
      return {};
    }
    outputs.push_back(method.get_output(i));
  }
  return describe_outputs(outputs.data(), outputs.size(), found->second->inputs.get());
}

StepResult LoadedProgram::execute(const std::string& name, int64_t* execute_us) {
  *execute_us = 0;
  auto found = methods_.find(name);
  if (found == methods_.end()) {
    return fail(et::Error::InvalidState, "method \"" + name + "\" is not loaded: send LOAD first");
  }
  const StepResult inputs = set_inputs(*found->second);
  if (!inputs.ok()) {
    return inputs;
  }
  const Clock::time_point start = Clock::now();
  const et::Error error = found->second->method->execute();
  *execute_us = micros_since(start);
  if (error != et::Error::Ok) {
    return fail(error, "Method::execute of \"" + name + "\" returned " + error_code(error));
  }
  return {};
}

}  // namespace etb
