// SPDX-License-Identifier: BSD-3-Clause
#include "model_instance.h"

#include <algorithm>
#include <new>

#include "owned_options_map.h"
#include "runtime_log.h"
#include "runtime_options.h"

namespace etb {

namespace {

namespace et = executorch::runtime;

constexpr const char* kDefaultMethod = "forward";

int32_t clamp_us(int64_t us) { return static_cast<int32_t>(std::min<int64_t>(us, INT32_MAX)); }

// A map built from a backend list of the request.
std::unique_ptr<OwnedOptionsMap> build_map(const etb_backend_t* backends, uint8_t count, const char* what,
                                           StepResult* step) {
  auto map = std::make_unique<OwnedOptionsMap>();
  std::string refused_id;
  const et::Error error = map->build(backends, count, &refused_id);
  if (error != et::Error::Ok) {
    *step = StepResult{error, std::string(what) + ": LoadBackendOptionsMap::set_options(\"" + refused_id +
                                  "\") refused the entry (id of " + std::to_string(refused_id.size()) + " bytes)"};
    return nullptr;
  }
  return map;
}

std::string join(const std::vector<std::string>& ids) {
  std::string text = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    text += (i ? ", \"" : "\"") + ids[i] + "\"";
  }
  return text + "]";
}

}  // namespace

const char* path_label(uint8_t path) {
  switch (path) {
    case ETB_LOAD_PROGRAM:
      return "program";
    case ETB_LOAD_MODULE:
      return "module";
    case ETB_LOAD_MODULE_METHOD:
      return "module_method";
    default:
      return "module_both";
  }
}

ModelRequest ModelRequest::of(const etb_request_t& request, uint8_t model) {
  if (model == 0) {
    return ModelRequest{request.program,       request.delegate_count, request.delegates,
                        request.backend_count, request.backends,       &request.load};
  }
  const etb_model_t& m = request.models[model - 1];
  return ModelRequest{m.program, m.delegate_count, m.delegates, m.backend_count, m.backends, &m.load};
}

void ModelInstance::clear() {
  method_.clear();
  module_.reset();  // destroys the previous methods before the new ones load
  program_.reset();
  loaded_path_.clear();
}

bool ModelInstance::has_method() const {
  return !loading_.empty() && (program_ ? program_->has_method(loading_) : module_ && module_->has_method(loading_));
}

OutputFacts ModelInstance::outputs() const {
  return program_ ? program_->outputs(loading_) : module_ ? module_->outputs() : OutputFacts{};
}

StepResult ModelInstance::load(const ModelRequest& request, bool keep) {
  const etb_load_t& spec = *request.load;
  const std::string path(view(request.program));
  loading_ = spec.method.len != 0 ? std::string(view(spec.method)) : kDefaultMethod;
  program_load_us = load_us = execute_us = -1;
  delegate_ids_.clear();
  if (!keep) {
    clear();
  }
  if (path.empty()) {
    return StepResult{et::Error::InvalidArgument,
                      "LOAD needs a program path: this agent loads programs from its file system"};
  }
  if (keep && (spec.path == ETB_LOAD_PROGRAM ? !program_ : !module_)) {
    return StepResult{et::Error::InvalidState, std::string("KEEP on path ") + path_label(spec.path) +
                                                   " needs a program loaded before on a " +
                                                   (spec.path == ETB_LOAD_PROGRAM ? "program" : "module") + " path"};
  }
  if (keep && loaded_path_ != path) {
    return StepResult{et::Error::InvalidArgument, "KEEP names program " + path + ", the loaded " +
                                                      (spec.path == ETB_LOAD_PROGRAM ? "program" : "module") + " is " +
                                                      loaded_path_};
  }
  try {
    const MissingOperators missing;  // what Method::init logs on this thread, named in the report
    return missing.named_in(spec.path == ETB_LOAD_PROGRAM ? load_program(request, path) : load_module(request, path));
  } catch (const std::bad_alloc&) {
    // What a program asks for that the agent does not bound itself (the Module
    // paths' planned memory is the runtime's own allocation).
    return StepResult{et::Error::MemoryAllocationFailed, "out of memory loading " + path};
  }
}

StepResult ModelInstance::check_delegates(const ModelRequest& request, const std::string& path) const {
  std::vector<std::string> expected;
  for (uint8_t i = 0; i < request.delegate_count; ++i) {
    expected.emplace_back(view(request.delegates[i]));
  }
  if (expected == delegate_ids_) {
    return {};
  }
  return StepResult{et::Error::InvalidProgram, "program " + path + " delegates to " + join(delegate_ids_) +
                                                   ", the request names " + join(expected)};
}

StepResult ModelInstance::load_program(const ModelRequest& request, const std::string& path) {
  if (!program_) {
    auto program = std::make_unique<LoadedProgram>();
    int64_t open_us = 0;
    StepResult step = program->open(path, &open_us);
    program_load_us = clamp_us(open_us);
    if (!step.ok()) {
      return step;
    }
    program_ = std::move(program);
    loaded_path_ = path;
  }
  StepResult step = program_->delegate_ids(loading_, &delegate_ids_);
  if (step.ok()) {
    step = check_delegates(request, path);
  }
  if (!step.ok()) {
    return step;
  }
  auto map = build_map(request.backends, request.backend_count, "LOAD", &step);
  if (!map) {
    return step;
  }
  int64_t us = 0;
  step = program_->load_method(loading_, std::move(map), &us);
  load_us = clamp_us(us);
  if (!step.ok()) {
    return step;
  }
  return run_once();
}

StepResult ModelInstance::load_module(const ModelRequest& request, const std::string& path) {
  const etb_load_t& spec = *request.load;
  if (!module_) {
    module_ = std::make_unique<LoadedModule>(path);
    loaded_path_ = path;
  }
  StepResult step;
  int64_t total_us = 0;
  int64_t us = 0;
  // The caller's map: handed to Module::load, then released before the method
  // loads, its storage holding another model's map (OwnedOptionsMap::release), as a
  // caller that frees its map at once would see. The storage stays allocated until
  // this load ends, so a runtime that kept a pointer to it delivers those other
  // values, visibly, rather than reading freed memory.
  std::unique_ptr<OwnedOptionsMap> stored;
  if (spec.path == ETB_LOAD_MODULE_METHOD) {
    step = module_->load(&us);
  } else {
    stored = build_map(request.backends, request.backend_count, "LOAD stored map", &step);
    if (!stored) {
      return step;
    }
    step = module_->load(*stored, &us);
    stored->release();
  }
  total_us += us;
  if (step.ok()) {
    step = module_->delegate_ids(loading_, &delegate_ids_);
  }
  if (step.ok()) {
    step = check_delegates(request, path);
  }
  if (step.ok() && spec.path != ETB_LOAD_MODULE) {
    const bool both = spec.path == ETB_LOAD_MODULE_BOTH;
    auto explicit_map = both ? build_map(spec.method_backends, spec.method_backend_count, "LOAD method map", &step)
                             : build_map(request.backends, request.backend_count, "LOAD", &step);
    if (!explicit_map) {
      return step;
    }
    step = module_->load_method(loading_, std::move(explicit_map), &us);
    total_us += us;
  }
  load_us = clamp_us(total_us);
  if (!step.ok()) {
    return step;
  }
  return run_once();  // path module: the method loads here, lazily
}

StepResult ModelInstance::run_once() {
  method_ = loading_;
  int64_t us = 0;
  StepResult step = program_ ? program_->execute(method_, &us) : module_->execute(method_, &us);
  execute_us = clamp_us(us);
  return step;
}

StepResult ModelInstance::execute() {
  if (method_.empty()) {
    return StepResult{et::Error::InvalidState, "no program loaded: send LOAD first"};
  }
  loading_ = method_;
  return run_once();
}

}  // namespace etb
