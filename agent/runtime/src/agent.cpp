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

// LOAD directives (docs/wire-format.md, "Agent directives"): keys a request
// cannot otherwise express. "etb.dup:KEY" is delivered as KEY, so a span can
// hold one key twice; "etb.id_suffix" (string) is appended to the backend id
// given to LoadBackendOptionsMap::set_options and not delivered.
constexpr std::string_view kDupPrefix = "etb.dup:";
constexpr std::string_view kIdSuffixKey = "etb.id_suffix";
constexpr const char* kDirectives = "etb.dup:,etb.id_suffix";

// One backend of a LOAD as the runtime gets it: its id (directives applied)
// and its options, written into options[first...].
et::Span<et::BackendOption> load_entry_of(const etb_backend_t& backend,
    std::vector<et::BackendOption>& options, size_t first, std::string* id) {
  id->assign(view(backend.id));
  size_t count = 0;
  for (uint8_t i = 0; i < backend.option_count; ++i) {
    etb_option_t option = backend.options[i];
    const std::string_view key = view(option.key);
    if (key == kIdSuffixKey && option.type == ETB_TYPE_STRING) {
      id->append(view(option.s));
      continue;
    }
    if (key.substr(0, kDupPrefix.size()) == kDupPrefix && key.size() > kDupPrefix.size()) {
      option.key.ptr += kDupPrefix.size();
      option.key.len = static_cast<uint16_t>(option.key.len - kDupPrefix.size());
    }
    to_runtime_option(option, options[first + count++]);
  }
  return et::Span<et::BackendOption>(options.data() + first, count);
}

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
        report.append_message(std::string("probe ") + probe->name() +
            ": a later init received runtime_specs different from the first");
      }
    }
  }
}

void Agent::load(const etb_request_t& request, ReportBuilder& report) {
  program_.reset();  // destroys the previous method before the new one loads
  const std::string path(view(request.program));
  if (path.empty()) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(et::Error::InvalidArgument),
        "LOAD needs a program path: this agent loads programs from its file system");
    return;
  }
  auto program = std::make_unique<LoadedProgram>();
  int64_t program_load_us = 0;
  StepResult step = program->open(path, &program_load_us);
  report.add_fact("program_load_us", clamp_us(program_load_us));
  if (!step.ok()) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(step.error), step.message);
    return;
  }
  std::vector<std::string>& actual = delegate_ids_;
  step = program->delegate_ids(&actual);
  if (!step.ok()) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(step.error), step.message);
    return;
  }
  if (!same_ids(actual, request)) {
    std::vector<std::string> expected;
    for (uint8_t i = 0; i < request.delegate_count; ++i) {
      expected.emplace_back(view(request.delegates[i]));
    }
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(et::Error::InvalidProgram),
        "program " + path + " delegates to " + join(actual) + ", the request names " + join(expected));
    return;
  }

  // The map holds spans into load_options_ and the backend ids by value.
  size_t total = 0;
  for (uint8_t i = 0; i < request.backend_count; ++i) {
    total += request.backends[i].option_count;
  }
  reserve_options(load_options_, total);
  et::LoadBackendOptionsMap map;
  size_t used = 0;
  std::string id;
  for (uint8_t i = 0; i < request.backend_count; ++i) {
    const et::Span<et::BackendOption> options = load_entry_of(request.backends[i], load_options_, used, &id);
    used += options.size();
    const et::Error error = map.set_options(id.c_str(), options);
    if (error != et::Error::Ok) {
      report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(error),
          "LoadBackendOptionsMap::set_options(\"" + id + "\") refused the entry (id of " +
          std::to_string(id.size()) + " bytes)");
      return;
    }
  }

  int64_t load_us = 0;
  step = program->load_method(map, &load_us);
  report.add_fact("load_us", clamp_us(load_us));
  if (step.ok()) {
    int64_t execute_us = 0;
    step = program->execute(&execute_us);
    report.add_fact("execute_us", clamp_us(execute_us));
  }
  const et::Error init_status = program->has_method() ? et::Error::Ok : step.error;
  if (!step.ok()) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(step.error), step.message);
    for (const std::string& id : actual) {
      if (et::get_backend_class(id.c_str()) == nullptr) {
        report.append_message("delegate \"" + id + "\" has no registered backend");
      }
    }
  }
  add_output_fact(*program, report);
  if (program->has_method()) {
    program_ = std::move(program);
  }
  add_probe_entries(report, /*with_received=*/true);
  add_real_backend_entries(actual, init_status, report);
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

void Agent::add_output_fact(const LoadedProgram& program, ReportBuilder& report) {
  const std::string outputs = program.float_outputs();
  if (!outputs.empty()) {
    report.add_fact("outputs", outputs.substr(0, ETB_MAX_STRING));
  }
}

void Agent::execute(ReportBuilder& report) {
  if (!program_) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(et::Error::InvalidState),
        "no program loaded: send LOAD first");
    return;
  }
  int64_t execute_us = 0;
  const StepResult step = program_->execute(&execute_us);
  report.add_fact("execute_us", clamp_us(execute_us));
  if (!step.ok()) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(step.error), step.message);
  }
  add_output_fact(*program_, report);
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
