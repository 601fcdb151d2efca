#include "agent.h"

#include <executorch/runtime/backend/interface.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime_options.h"

namespace etb {

namespace {

namespace et = executorch::runtime;

constexpr int32_t kRegistryCapacity = 16;  // kMaxRegisteredBackends in runtime/backend/interface.cpp
constexpr const char* kCapabilities = "load,execute,set,get,reset,register,hello";
constexpr const char* kLoadPaths = "program,module,module_method,module_both";
constexpr const char* kLoadFlags = "keep";
// Models one LOAD may carry (wire-format.md, LOAD): this agent loads one program
// instance per LOAD, so further models and CONCURRENT are UNSUPPORTED.
constexpr int32_t kMaxModels = 1;
constexpr const char* kDefaultMethod = "forward";

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

StepResult refused(et::Error error, const std::string& what, const std::string& refused_id) {
  return StepResult{error, what + ": LoadBackendOptionsMap::set_options(\"" + refused_id +
      "\") refused the entry (id of " + std::to_string(refused_id.size()) + " bytes)"};
}

// A map built from a backend list of the request.
std::unique_ptr<OwnedOptionsMap> build_map(const etb_backend_t* backends, uint8_t count, const char* what,
    StepResult* step) {
  auto map = std::make_unique<OwnedOptionsMap>();
  std::string refused_id;
  const et::Error error = map->build(backends, count, &refused_id);
  if (error != et::Error::Ok) {
    *step = refused(error, what, refused_id);
    return nullptr;
  }
  return map;
}

uint32_t status_of(et::Error error) {
  return static_cast<uint32_t>(error);
}

int32_t clamp_us(int64_t us) {
  return static_cast<int32_t>(std::min<int64_t>(us, INT32_MAX));
}

// Makes options hold at least count elements; it never shrinks, so that its
// elements are reused from request to request.
void reserve_options(std::vector<et::BackendOption>& options, size_t count) {
  if (options.size() < count) {
    options.resize(count);
  }
}

// The runtime options of a backend, written into options[first...], which the
// caller has made large enough with reserve_options.
et::Span<et::BackendOption> runtime_options_of(const etb_backend_t& backend,
    std::vector<et::BackendOption>& options, size_t first) {
  for (uint8_t i = 0; i < backend.option_count; ++i) {
    to_runtime_option(backend.options[i], options[first + i]);
  }
  return et::Span<et::BackendOption>(options.data() + first, backend.option_count);
}

// The LOAD directives OwnedOptionsMap::build applies (docs/wire-format.md, "Agent directives").
constexpr const char* kDirectives = "etb.dup:,etb.id_suffix";

// A wire string as a NUL-terminated C string, in a buffer of ETB_MAX_ID + 1 bytes.
const char* c_id(etb_str_t id, char (&buf)[ETB_MAX_ID + 1]) {
  const size_t len = std::min<size_t>(id.len, ETB_MAX_ID);
  std::memcpy(buf, id.ptr, len);
  buf[len] = '\0';
  return buf;
}

bool same_ids(const std::vector<std::string>& ids, const etb_request_t& request) {
  if (ids.size() != request.delegate_count) {
    return false;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != view(request.delegates[i])) {
      return false;
    }
  }
  return true;
}

std::string join(const std::vector<std::string>& ids) {
  std::string text = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    text += (i ? ", \"" : "\"") + ids[i] + "\"";
  }
  return text + "]";
}

}  // namespace

void add_device_facts(ReportBuilder& report) {
  report.add_fact("agent_version", ETB_AGENT_VERSION);
  report.add_fact("wire_version", static_cast<int32_t>(ETB_WIRE_VERSION));
  report.add_fact("runtime", "executorch " ETB_EXECUTORCH_VERSION);
  report.add_fact("abi", ETB_ABI);
  report.add_fact("max_message", static_cast<int32_t>(ETB_MAX_MESSAGE));
  report.add_fact("registry_capacity", kRegistryCapacity);
  report.add_fact("capabilities", kCapabilities);
  report.add_fact("load_paths", kLoadPaths);
  report.add_fact("load_flags", kLoadFlags);
  report.add_fact("max_models", kMaxModels);
  report.add_fact("directives", kDirectives);
}

void Agent::handle(const etb_request_t& request, ReportBuilder& report) {
  for (const auto& probe : probes_) {
    probe->begin_request();
  }
  switch (request.action) {
    case ETB_ACTION_LOAD:
      load(request, report);
      break;
    case ETB_ACTION_EXECUTE:
      execute(report);
      break;
    case ETB_ACTION_SET:
      set(request, report);
      break;
    case ETB_ACTION_GET:
      get(request, report);
      break;
    case ETB_ACTION_RESET:
      reset();
      break;
    case ETB_ACTION_REGISTER:
      register_probes(request, report);
      break;
    case ETB_ACTION_HELLO:
      hello(report);
      break;
    default:
      report.set_outcome(ETB_OUTCOME_UNSUPPORTED, 0, "action not served by this agent");
      break;
  }
}

ProbeBackend* Agent::find_probe(std::string_view name) const {
  for (const auto& probe : probes_) {
    if (name == probe->name()) {
      return probe.get();
    }
  }
  return nullptr;
}

void Agent::add_probe_entries(ReportBuilder& report, bool with_received) const {
  std::vector<const ProbeBackend*>& called = called_;
  called.clear();
  for (const auto& probe : probes_) {
    if (probe->record().first_call != 0) {
      called.push_back(probe.get());
    }
  }
  std::sort(called.begin(), called.end(), [](const ProbeBackend* a, const ProbeBackend* b) {
    return a->record().first_call < b->record().first_call;
  });
  for (const ProbeBackend* probe : called) {
    const ProbeBackend::Record& record = probe->record();
    if (!with_received && record.execute_calls == 0) {
      continue;
    }
    report.add_entry(probe->name(), 0, with_received ? record.init_calls : 0, record.execute_calls, ETB_ENTRY_FLAG_PROBE);
    if (with_received) {
      for (const et::BackendOption& option : record.received) {
        report.add_option(option);
      }
      for (const et::BackendOption& option : record.lookups) {
        report.add_option(option);
      }
      if (record.specs_diverged) {
        // A second entry under the same name: what the first diverging init got.
        report.add_entry(probe->name(), 0, 1, 0, ETB_ENTRY_FLAG_PROBE);
        for (const et::BackendOption& option : record.diverged) {
          report.add_option(option);
        }
        report.append_message(std::string("probe ") + probe->name() +
            ": a later init received runtime_specs different from the first (second entry)");
      }
    }
  }
}

void Agent::load(const etb_request_t& request, ReportBuilder& report) {
  const etb_load_t& spec = request.load;
  if (request.model_count + 1 > kMaxModels || (spec.flags & ETB_LOAD_FLAG_CONCURRENT) != 0) {
    report.set_outcome(ETB_OUTCOME_UNSUPPORTED, 0, "this agent loads " + std::to_string(kMaxModels) +
        " model per LOAD (max_models), this one carries " + std::to_string(request.model_count + 1) +
        ((spec.flags & ETB_LOAD_FLAG_CONCURRENT) != 0 ? ", CONCURRENT" : ""));
    return;
  }
  const bool keep = (spec.flags & ETB_LOAD_FLAG_KEEP) != 0;
  const std::string path(view(request.program));
  const std::string method = spec.method.len != 0 ? std::string(view(spec.method)) : kDefaultMethod;
  report.add_fact("load_path", path_label(spec.path));
  if (!keep) {
    method_.clear();
    module_.reset();  // destroys the previous methods before the new ones load
    program_.reset();
  }
  StepResult step;
  if (path.empty()) {
    step = StepResult{et::Error::InvalidArgument, "LOAD needs a program path: this agent loads programs from its file system"};
  } else if (keep && (spec.path == ETB_LOAD_PROGRAM ? !program_ : !module_)) {
    step = StepResult{et::Error::InvalidState, std::string("KEEP on path ") + path_label(spec.path) +
        " needs a program loaded before on a " + (spec.path == ETB_LOAD_PROGRAM ? "program" : "module") + " path"};
  } else if (keep && spec.path != ETB_LOAD_PROGRAM && module_->path() != path) {
    step = StepResult{et::Error::InvalidArgument, "KEEP names program " + path + ", the loaded module is " + module_->path()};
  } else {
    step = spec.path == ETB_LOAD_PROGRAM ? load_program(request, path, method, report)
                                         : load_module(request, path, method, report);
  }
  const bool loaded = program_ ? program_->has_method(method) : module_ && module_->has_method(method);
  const et::Error init_status = loaded ? et::Error::Ok : step.error;
  if (!step.ok()) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(step.error), step.message);
    std::vector<std::string>& ids = delegate_ids_;
    for (const std::string& id : ids) {
      if (et::get_backend_class(id.c_str()) == nullptr) {
        report.append_message("delegate \"" + id + "\" has no registered backend");
      }
    }
  }
  if (loaded) {
    add_output_fact(program_ ? program_->float_outputs(method) : module_->float_outputs(), report);
  }
  add_probe_entries(report, /*with_received=*/true);
  add_real_backend_entries(delegate_ids_, init_status, report);
}

void Agent::add_real_backend_entries(const std::vector<std::string>& delegates, et::Error init_status,
    ReportBuilder& report) const {
  for (size_t i = 0; i < delegates.size(); ++i) {
    const std::string& id = delegates[i];
    const bool seen = std::find(delegates.begin(), delegates.begin() + i, id) != delegates.begin() + i;
    if (seen || find_probe(id) != nullptr || et::get_backend_class(id.c_str()) == nullptr) {
      continue;
    }
    // A real backend records nothing the agent can read: what is observable
    // is whether the method's delegates initialised, i.e. load_method's result.
    report.add_entry(id, status_of(init_status), 0, 0, 0);
  }
}

void Agent::add_output_fact(const std::string& outputs, ReportBuilder& report) {
  if (!outputs.empty()) {
    report.add_fact("outputs", outputs.substr(0, ETB_MAX_STRING));
  }
}

StepResult Agent::check_delegates(const std::vector<std::string>& actual, const etb_request_t& request,
    const std::string& path) const {
  if (same_ids(actual, request)) {
    return {};
  }
  std::vector<std::string> expected;
  for (uint8_t i = 0; i < request.delegate_count; ++i) {
    expected.emplace_back(view(request.delegates[i]));
  }
  return StepResult{et::Error::InvalidProgram,
      "program " + path + " delegates to " + join(actual) + ", the request names " + join(expected)};
}

StepResult Agent::load_program(const etb_request_t& request, const std::string& path, const std::string& method,
    ReportBuilder& report) {
  delegate_ids_.clear();
  if (!program_) {
    auto program = std::make_unique<LoadedProgram>();
    int64_t open_us = 0;
    StepResult step = program->open(path, &open_us);
    report.add_fact("program_load_us", clamp_us(open_us));
    if (!step.ok()) {
      return step;
    }
    program_ = std::move(program);
  }
  StepResult step = program_->delegate_ids(method, &delegate_ids_);
  if (step.ok()) {
    step = check_delegates(delegate_ids_, request, path);
  }
  if (!step.ok()) {
    return step;
  }
  auto map = build_map(request.backends, request.backend_count, "LOAD", &step);
  if (!map) {
    return step;
  }
  int64_t load_us = 0;
  step = program_->load_method(method, std::move(map), &load_us);
  report.add_fact("load_us", clamp_us(load_us));
  if (!step.ok()) {
    return step;
  }
  method_ = method;
  int64_t execute_us = 0;
  step = program_->execute(method, &execute_us);
  report.add_fact("execute_us", clamp_us(execute_us));
  return step;
}

StepResult Agent::load_module(const etb_request_t& request, const std::string& path, const std::string& method,
    ReportBuilder& report) {
  const etb_load_t& spec = request.load;
  delegate_ids_.clear();
  if (!module_) {
    module_ = std::make_unique<LoadedModule>(path);
  }
  StepResult step;
  int64_t load_us = 0;
  int64_t us = 0;
  // The caller's map: handed to Module::load, then overwritten before the method
  // loads, as a caller that releases its map at once would do. Its storage stays
  // allocated (poisoned) until this request ends, so a runtime that kept a pointer
  // to it delivers the poison, visibly, rather than whatever reuses the memory.
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
  load_us += us;
  if (step.ok()) {
    step = module_->delegate_ids(method, &delegate_ids_);
  }
  if (step.ok()) {
    step = check_delegates(delegate_ids_, request, path);
  }
  if (step.ok() && spec.path != ETB_LOAD_MODULE) {
    const bool both = spec.path == ETB_LOAD_MODULE_BOTH;
    auto explicit_map = both ? build_map(spec.method_backends, spec.method_backend_count, "LOAD method map", &step)
                             : build_map(request.backends, request.backend_count, "LOAD", &step);
    if (!explicit_map) {
      return step;
    }
    step = module_->load_method(method, std::move(explicit_map), &us);
    load_us += us;
  }
  report.add_fact("load_us", clamp_us(load_us));
  if (!step.ok()) {
    return step;
  }
  method_ = method;
  int64_t execute_us = 0;
  step = module_->execute(method, &execute_us);  // path module: the method loads here, lazily
  report.add_fact("execute_us", clamp_us(execute_us));
  return step;
}

void Agent::execute(ReportBuilder& report) {
  if (method_.empty()) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(et::Error::InvalidState),
        "no program loaded: send LOAD first");
    return;
  }
  int64_t execute_us = 0;
  const StepResult step = program_ ? program_->execute(method_, &execute_us) : module_->execute(method_, &execute_us);
  report.add_fact("execute_us", clamp_us(execute_us));
  if (!step.ok()) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(step.error), step.message);
  }
  add_output_fact(program_ ? program_->float_outputs(method_) : module_->float_outputs(), report);
  add_probe_entries(report, /*with_received=*/false);
}

void Agent::set(const etb_request_t& request, ReportBuilder& report) {
  for (uint8_t i = 0; i < request.backend_count; ++i) {
    const etb_backend_t& backend = request.backends[i];
    char id[ETB_MAX_ID + 1];
    reserve_options(call_options_, backend.option_count);
    const et::Span<et::BackendOption> options = runtime_options_of(backend, call_options_, 0);
    const et::Error error = et::set_option(c_id(backend.id, id), options);
    if (const ProbeBackend* probe = find_probe(id)) {
      const ProbeBackend::Record& record = probe->record();
      report.add_entry(probe->name(), status_of(error), record.set_calls, 0, ETB_ENTRY_FLAG_PROBE);
      for (const et::BackendOption& option : record.received) {
        report.add_option(option);
      }
    } else {
      report.add_entry(id, status_of(error), 0, 0, 0);
    }
  }
}

void Agent::get(const etb_request_t& request, ReportBuilder& report) {
  for (uint8_t i = 0; i < request.backend_count; ++i) {
    const etb_backend_t& backend = request.backends[i];
    char id[ETB_MAX_ID + 1];
    reserve_options(call_options_, backend.option_count);
    et::Span<et::BackendOption> options = runtime_options_of(backend, call_options_, 0);
    const et::Error error = et::get_option(c_id(backend.id, id), options);
    if (const ProbeBackend* probe = find_probe(id)) {
      report.add_entry(probe->name(), status_of(error), probe->record().get_calls, 0, ETB_ENTRY_FLAG_PROBE);
    } else {
      report.add_entry(id, status_of(error), 0, 0, 0);
    }
    for (const et::BackendOption& option : options) {
      report.add_option(option);
    }
  }
}

void Agent::reset() {
  method_.clear();
  module_.reset();
  program_.reset();
  for (const auto& probe : probes_) {
    probe->reset();
  }
}

void Agent::register_probes(const etb_request_t& request, ReportBuilder& report) {
  for (uint8_t i = 0; i < request.backend_count; ++i) {
    auto probe = std::make_unique<ProbeBackend>(std::string(view(request.backends[i].id)));
    const et::Error error = et::register_backend(et::Backend{probe->name(), probe.get()});
    if (error == et::Error::Ok) {
      report.add_entry(probe->name(), status_of(error), 0, 0, ETB_ENTRY_FLAG_PROBE);
      probes_.push_back(std::move(probe));
    } else {
      // Not in the registry, so nothing refers to it.
      report.add_entry(probe->name(), status_of(error), 0, 0, 0);
    }
  }
}

void Agent::hello(ReportBuilder& report) {
  add_device_facts(report);
  const size_t count = et::get_num_registered_backends();
  for (size_t i = 0; i < count; ++i) {
    auto name = et::get_backend_name(i);
    if (!name.ok()) {
      report.append_message("get_backend_name(" + std::to_string(i) + ") failed");
      continue;
    }
    report.add_entry(*name, 0, 0, 0, find_probe(*name) ? ETB_ENTRY_FLAG_PROBE : 0);
  }
}

}  // namespace etb
