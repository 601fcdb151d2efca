#include "loaded_program.h"

#include <chrono>
#include <utility>

namespace etb {

namespace {

using Clock = std::chrono::steady_clock;

int64_t micros_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

StepResult fail(et::Error error, std::string message) {
  return StepResult{error, std::move(message)};
}

std::string code(et::Error error) {
  char text[16];
  snprintf(text, sizeof(text), "0x%02x", static_cast<unsigned>(error));
  return text;
}

}  // namespace

StepResult LoadedProgram::open(const std::string& path, int64_t* open_us) {
  const Clock::time_point start = Clock::now();
  const StepResult result = open_file(path);
  *open_us = micros_since(start);
  return result;
}

StepResult LoadedProgram::open_file(const std::string& path) {
  auto loader = executorch::extension::FileDataLoader::from(path.c_str());
  if (!loader.ok()) {
    return fail(loader.error(), "cannot open program " + path + ": FileDataLoader::from returned " + code(loader.error()));
  }
  loader_ = std::make_unique<executorch::extension::FileDataLoader>(std::move(*loader));
  auto program = et::Program::load(loader_.get(), et::Program::Verification::InternalConsistency);
  if (!program.ok()) {
    return fail(program.error(), "Program::load of " + path + " returned " + code(program.error()));
  }
  program_.emplace(std::move(*program));
  return {};
}

StepResult LoadedProgram::delegate_ids(std::vector<std::string>* out) const {
  auto meta = program_->method_meta(kMethodName);
  if (!meta.ok()) {
    return fail(meta.error(), std::string("program has no method \"") + kMethodName + "\": method_meta returned " + code(meta.error()));
  }
  out->clear();
  for (size_t i = 0; i < meta->num_backends(); ++i) {
    auto name = meta->get_backend_name(i);
    if (!name.ok()) {
      return fail(name.error(), "MethodMeta::get_backend_name(" + std::to_string(i) + ") returned " + code(name.error()));
    }
    out->emplace_back(*name);
  }
  return {};
}

StepResult LoadedProgram::load_method(const et::LoadBackendOptionsMap& map, int64_t* load_us) {
  auto meta = program_->method_meta(kMethodName);
  if (!meta.ok()) {
    return fail(meta.error(), std::string("program has no method \"") + kMethodName + "\"");
  }
  planned_buffers_.clear();
  planned_spans_.clear();
  for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
    auto size = meta->memory_planned_buffer_size(i);
    if (!size.ok() || *size < 0) {
      return fail(size.ok() ? et::Error::InvalidProgram : size.error(), "bad memory-planned buffer size in program");
    }
    planned_buffers_.emplace_back(static_cast<size_t>(*size));
    planned_spans_.emplace_back(planned_buffers_.back().data(), planned_buffers_.back().size());
  }
  planned_memory_.emplace(et::Span<et::Span<uint8_t>>(planned_spans_.data(), planned_spans_.size()));
  memory_manager_.emplace(&method_allocator_, &*planned_memory_, &temp_allocator_);

  const Clock::time_point start = Clock::now();
  auto method = program_->load_method(kMethodName, &*memory_manager_, nullptr, nullptr, &map);
  *load_us = micros_since(start);
  if (!method.ok()) {
    return fail(method.error(), std::string("Program::load_method(\"") + kMethodName + "\") returned " + code(method.error()));
  }
  method_.emplace(std::move(*method));
  return {};
}

StepResult LoadedProgram::execute(int64_t* execute_us) {
  if (!method_) {
    return fail(et::Error::InvalidState, "no method loaded: send LOAD first");
  }
  const Clock::time_point start = Clock::now();
  const et::Error error = method_->execute();
  *execute_us = micros_since(start);
  if (error != et::Error::Ok) {
    return fail(error, "Method::execute returned " + code(error));
  }
  return {};
}

}  // namespace etb
