// SPDX-License-Identifier: BSD-3-Clause
#include "agent.h"

#include <executorch/runtime/backend/interface.h>

#include <sys/reboot.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "recording_backend.h"
#include "runtime_label.h"
#include "runtime_options.h"
#include "tree_api.h"

namespace etb {

namespace {

namespace et = executorch::runtime;

constexpr int32_t kRegistryCapacity = 16;  // kMaxRegisteredBackends in runtime/backend/interface.cpp
#if ETB_HAS_LOAD_TIME_MAP
constexpr const char* kCapabilities = "load,execute,set,get,reset,register,hello";
#else  // nothing a LOAD delivers could be checked: not served
constexpr const char* kCapabilities = "execute,set,get,reset,register,hello";
#endif
#if !ETB_HAS_LOAD_TIME_MAP
constexpr const char* kLoadPaths = "";
#elif !ETB_HAS_MODULE_LOAD_MAP
constexpr const char* kLoadPaths = "program";
#else
constexpr const char* kLoadPaths = "program,module,module_method,module_both";
#endif
constexpr const char* kLoadFlags = "keep";
// Models one LOAD may carry (wire-format.md, LOAD): each is a program instance
// of its own; the bound is the wire's (a report holds ETB_MAX_BACKENDS entries
// in all, so K models of B probes each need K * B <= 16).
constexpr int32_t kMaxModels = ETB_MAX_MODELS;

uint32_t status_of(et::Error error) { return static_cast<uint32_t>(error); }

// Makes options hold at least count elements; it never shrinks, so that its
// elements are reused from request to request.
void reserve_options(std::vector<et::BackendOption>& options, size_t count) {
  if (options.size() < count) {
    options.resize(count);
  }
}

// The runtime options of a backend, written into options[first...], which the
// caller has made large enough with reserve_options.
et::Span<et::BackendOption> runtime_options_of(const etb_backend_t& backend, std::vector<et::BackendOption>& options,
                                               size_t first) {
  for (uint8_t i = 0; i < backend.option_count; ++i) {
    to_runtime_option(backend.options[i], options[first + i]);
  }
  return et::Span<et::BackendOption>(options.data() + first, backend.option_count);
}

// A named int option, its label cut to a key's 63 bytes at a UTF-8 boundary.
et::BackendOption int_option(std::string label, int value) {
  et::BackendOption option{};
  if (label.size() > sizeof(option.key) - 1) {
    size_t end = sizeof(option.key) - 1;
    while (end > 0 && (static_cast<unsigned char>(label[end]) & 0xC0) == 0x80) {
      --end;
    }
    label.resize(end);
  }
  std::memcpy(option.key, label.data(), label.size());
  option.value = value;
  return option;
}

// The options of a recorded real backend's entry (docs/wire-format.md,
// "Records"): what the hook was handed (at most `most`), then "etb.recorded" =
// how many, then "etb.returned" = the backend's own first non-Ok Error, then on
// LOAD one "etb.compile_spec:KEY" = the value's size per compile spec, as room allows.
void add_recorded_options(const std::vector<et::BackendOption>& delivered, const DeliveryRecord& record,
                          bool with_compile_specs, ReportBuilder& report, size_t most = ETB_MAX_OPTIONS - 2) {
  constexpr size_t kAnnotations = 2;
  const size_t count = std::min(delivered.size(), most);
  for (size_t i = 0; i < count; ++i) {
    report.add_option(delivered[i]);
  }
  report.add_option(int_option("etb.recorded", static_cast<int>(count)));
  report.add_option(int_option("etb.returned", static_cast<int>(record.returned)));
  size_t room = size_t{ETB_MAX_OPTIONS} - count - kAnnotations;
  for (const auto& [key, size] : record.compile_specs) {
    if (!with_compile_specs || room == 0) {
      break;
    }
    report.add_option(int_option("etb.compile_spec:" + key, static_cast<int>(size)));
    --room;
  }
}

// A recorded GET holds both ends of the call (docs/wire-format.md, "Records"):
// the span as the backend left it and, after the annotations, the span as the
// runtime's get_option handed it back to the agent, then "etb.caller" = how many.
// Each end holds at most kGetEndRoom options, so that both fit one entry.
constexpr size_t kGetEndRoom = (ETB_MAX_OPTIONS - 3) / 2;

void add_caller_options(et::Span<et::BackendOption> received, ReportBuilder& report) {
  const size_t count = std::min(received.size(), kGetEndRoom);
  for (size_t i = 0; i < count; ++i) {
    report.add_option(received[i]);
  }
  report.add_option(int_option("etb.caller", static_cast<int>(count)));
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

// Lets a number of threads start their work together: each waits in
// arrive_and_wait until all have arrived (std::latch is C++20).
class StartGate {
 public:
  explicit StartGate(size_t count) : waiting_(count) {}

  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--waiting_ == 0) {
      all_arrived_.notify_all();
      return;
    }
    all_arrived_.wait(lock, [this] { return waiting_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_arrived_;
  size_t waiting_;
};

}  // namespace

void add_device_facts(ReportBuilder& report) {
  report.add_fact("agent_version", ETB_AGENT_VERSION);
  report.add_fact("wire_version", static_cast<int32_t>(ETB_WIRE_VERSION));
  report.add_fact("runtime", std::string("executorch ") + runtime_label());
  report.add_fact("abi", ETB_ABI);
  report.add_fact("max_message", static_cast<int32_t>(ETB_MAX_MESSAGE));
  report.add_fact("registry_capacity", kRegistryCapacity);
  report.add_fact("capabilities", serves_reboot() ? std::string(kCapabilities) + ",reboot" : kCapabilities);
  report.add_fact("load_paths", kLoadPaths);
  report.add_fact("load_flags", kLoadFlags);
  report.add_fact("max_models", kMaxModels);
  report.add_fact("directives", kDirectives);
  if (*source_parts() != '\0') {
    report.add_fact("from_source", source_parts());
  }
  if (*source_lacks() != '\0') {
    report.add_fact("lacks", source_lacks());
  }
}

bool serves_reboot() {
  const char* asked = std::getenv("ET_AGENT_REBOOT");
  return asked != nullptr && std::strcmp(asked, "1") == 0 && ::geteuid() == 0;
}

void reboot_board() {
  ::sync();
  ::reboot(RB_AUTOBOOT);
}

void Agent::reboot(ReportBuilder& report) {
  if (!serves_reboot()) {
    report.set_outcome(ETB_OUTCOME_UNSUPPORTED, 0, "action not served by this agent");
    return;
  }
  reboot_pending_ = true;  // answered OK; the board reboots once the report is out
}

void Agent::handle(const etb_request_t& request, ReportBuilder& report) {
  for (const auto& probe : probes_) {
    probe->begin_request();
  }
  for (size_t i = 0; i < recorder_count(); ++i) {
    recorder_at(i).begin_request();
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
    case ETB_ACTION_REBOOT:
      reboot(report);
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
  const uint8_t model_count = static_cast<uint8_t>(std::max<size_t>(models_.size(), 1));
  for (uint8_t model = 0; model < model_count; ++model) {
    called.clear();
    for (const auto& probe : probes_) {
      if (probe->record(model).first_call != 0) {
        called.push_back(probe.get());
      }
    }
    std::sort(called.begin(), called.end(), [model](const ProbeBackend* a, const ProbeBackend* b) {
      return a->record(model).first_call < b->record(model).first_call;
    });
    for (const ProbeBackend* probe : called) {
      const ProbeBackend::Record& record = probe->record(model);
      if (!with_received && record.execute_calls == 0) {
        continue;
      }
      report.add_entry(probe->name(), 0, with_received ? record.init_calls : 0, record.execute_calls,
                       ETB_ENTRY_FLAG_PROBE, model);
      if (!with_received) {
        continue;
      }
      for (const et::BackendOption& option : record.received) {
        report.add_option(option);
      }
      for (const et::BackendOption& option : record.lookups) {
        report.add_option(option);
      }
      if (record.specs_diverged) {
        // A second entry under the same name: what the first diverging init got.
        report.add_entry(probe->name(), 0, 1, 0, ETB_ENTRY_FLAG_PROBE, model);
        for (const et::BackendOption& option : record.diverged) {
          report.add_option(option);
        }
        report.append_message(std::string("probe ") + probe->name() +
                              (model_count > 1 ? " in model " + std::to_string(model) : std::string()) +
                              ": a later init received runtime_specs different from the first (second entry)");
      }
    }
  }
}

void Agent::load(const etb_request_t& request, ReportBuilder& report) {
  const etb_load_t& spec = request.load;
  const size_t count = size_t{request.model_count} + 1;
  const bool keep = (spec.flags & ETB_LOAD_FLAG_KEEP) != 0;
  const bool concurrent = (spec.flags & ETB_LOAD_FLAG_CONCURRENT) != 0;
  report.add_fact("load_path", path_label(spec.path));
  if (std::strstr(kLoadPaths, path_label(spec.path)) == nullptr) {
    report.set_outcome(ETB_OUTCOME_UNSUPPORTED, 0,
                       std::string("load path ") + path_label(spec.path) +
                           " is not served: the runtime lacks it (HELLO lacks: " + source_lacks() + ")");
    return;
  }
  if (keep && count > 1) {
    report.set_outcome(ETB_OUTCOME_UNSUPPORTED, 0,
                       "KEEP loads into the one program loaded before: a LOAD of " + std::to_string(count) +
                           " models loads each afresh");
    return;
  }
  if (count > 1) {
    report.add_fact("models", static_cast<int32_t>(count));
  }
  std::vector<StepResult> results;
  load_models(request, keep, concurrent, results);
  ModelInstance& first = *models_[0];
  if (first.program_load_us >= 0) report.add_fact("program_load_us", first.program_load_us);
  if (first.load_us >= 0) report.add_fact("load_us", first.load_us);
  if (first.execute_us >= 0) report.add_fact("execute_us", first.execute_us);
  report_results(results, report);
  if (first.has_method()) {
    add_output_facts(first.outputs(), report);
  }
  add_probe_entries(report, /*with_received=*/true);
  for (size_t k = 0; k < count; ++k) {
    const et::Error init_status = models_[k]->has_method() ? et::Error::Ok : results[k].error;
    add_real_backend_entries(static_cast<uint8_t>(k), models_[k]->delegate_ids(), init_status, report);
  }
}

void Agent::load_models(const etb_request_t& request, bool keep, bool concurrent, std::vector<StepResult>& results) {
  const size_t count = size_t{request.model_count} + 1;
  if (!keep) {
    for (auto& model : models_) {
      model->clear();  // the previous methods go before the new ones load
    }
    models_.clear();
  }
  while (models_.size() < count) {
    models_.push_back(std::make_unique<ModelInstance>());
  }
  results.assign(count, StepResult{});
  auto load_one = [&](size_t k) {
    set_current_model(static_cast<uint8_t>(k));
    results[k] = models_[k]->load(ModelRequest::of(request, static_cast<uint8_t>(k)), keep);
    set_current_model(0);
  };
  if (!concurrent) {
    for (size_t k = 0; k < count; ++k) {
      load_one(k);
    }
    return;
  }
  StartGate gate(count);
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    threads.emplace_back([&, k] {
      gate.arrive_and_wait();
      load_one(k);
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
}

void Agent::report_results(const std::vector<StepResult>& results, ReportBuilder& report) const {
  const bool several = results.size() > 1;
  bool failed = false;
  for (size_t k = 0; k < results.size(); ++k) {
    const StepResult& step = results[k];
    if (step.ok()) {
      continue;
    }
    const std::string message = (several ? "model " + std::to_string(k) + ": " : std::string()) + step.message;
    if (!failed) {
      report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(step.error), message);
      failed = true;
    } else {
      report.append_message(message + " (" + error_code(step.error) + ")");
    }
    for (const std::string& id : models_[k]->delegate_ids()) {
      if (et::get_backend_class(id.c_str()) == nullptr) {
        report.append_message("delegate \"" + id + "\" has no registered backend");
      }
    }
  }
}

void Agent::add_real_backend_entries(uint8_t model, const std::vector<std::string>& delegates, et::Error init_status,
                                     ReportBuilder& report) const {
  for (size_t i = 0; i < delegates.size(); ++i) {
    const std::string& id = delegates[i];
    const bool seen = std::find(delegates.begin(), delegates.begin() + i, id) != delegates.begin() + i;
    if (seen || find_probe(id) != nullptr || et::get_backend_class(id.c_str()) == nullptr) {
      continue;
    }
    add_real_backend_entry(model, id, init_status, report);
  }
  if (!RecordingBackend::recording()) {
    return;
  }
  // A recorded backend whose hooks ran for this model although it is none of
  // its delegates (a runtime calling the wrong backend), in first-call order.
  std::vector<const RecordingBackend*> strays;
  for (size_t i = 0; i < recorder_count(); ++i) {
    const RecordingBackend& recorder = recorder_at(i);
    if (recorder.record(model).first_call != 0 &&
        std::find(delegates.begin(), delegates.end(), recorder.name()) == delegates.end()) {
      strays.push_back(&recorder);
    }
  }
  std::sort(strays.begin(), strays.end(), [model](const RecordingBackend* a, const RecordingBackend* b) {
    return a->record(model).first_call < b->record(model).first_call;
  });
  for (const RecordingBackend* recorder : strays) {
    add_real_backend_entry(model, recorder->name(), init_status, report);
  }
}

void Agent::add_real_backend_entry(uint8_t model, std::string_view id, et::Error init_status,
                                   ReportBuilder& report) const {
  // status: whether the method's delegates initialised (load_method's result).
  const RecordingBackend* recorder = RecordingBackend::recording() ? find_recorder(id) : nullptr;
  if (recorder == nullptr) {
    report.add_entry(id, status_of(init_status), 0, 0, 0, model);
    return;
  }
  const DeliveryRecord& record = recorder->record(model);
  report.add_entry(id, status_of(init_status), record.init_calls, record.execute_calls, 0, model);
  add_recorded_options(record.received, record, /*with_compile_specs=*/true, report);
  if (record.specs_diverged) {
    report.add_entry(id, status_of(init_status), 1, 0, 0, model);
    add_recorded_options(record.diverged, record, /*with_compile_specs=*/false, report);
    report.append_message("backend " + std::string(id) +
                          (models_.size() > 1 ? " in model " + std::to_string(model) : std::string()) +
                          ": a later init received runtime_specs different from the first (second entry)");
  }
}

void Agent::add_output_facts(const OutputFacts& outputs, ReportBuilder& report) {
  if (outputs.count == 0) {
    return;
  }
  report.add_fact("output_count", static_cast<int32_t>(outputs.count));
  for (const auto& [key, value] : outputs.texts) {
    report.add_fact(key, value);
  }
}

void Agent::execute(ReportBuilder& report) {
  const bool loaded = std::any_of(models_.begin(), models_.end(),
                                  [](const std::unique_ptr<ModelInstance>& model) { return !model->method().empty(); });
  if (!loaded) {
    report.set_outcome(ETB_OUTCOME_RUNTIME_ERROR, status_of(et::Error::InvalidState),
                       "no program loaded: send LOAD first");
    return;
  }
  // Every model the last LOAD loaded; one that failed to load answers InvalidState.
  std::vector<StepResult> results(models_.size());
  for (size_t k = 0; k < models_.size(); ++k) {
    set_current_model(static_cast<uint8_t>(k));
    results[k] = models_[k]->execute();
  }
  set_current_model(0);
  report.add_fact("execute_us", models_[0]->execute_us);
  report_results(results, report);
  add_output_facts(models_[0]->outputs(), report);
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
    } else if (const RecordingBackend* recorder = recorded(id)) {
      const DeliveryRecord& record = recorder->record();
      report.add_entry(id, status_of(error), record.set_calls, 0, 0);
      add_recorded_options(record.received, record, /*with_compile_specs=*/false, report);
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
    } else if (const RecordingBackend* recorder = recorded(id)) {
      // Both ends: the span as the backend's own call left it, in the order it was
      // handed, then the span as get_option handed it back to its caller (the agent).
      const DeliveryRecord& record = recorder->record();
      report.add_entry(id, status_of(error), record.get_calls, 0, 0);
      add_recorded_options(record.received, record, /*with_compile_specs=*/false, report, kGetEndRoom);
      add_caller_options(options, report);
      continue;
    } else {
      report.add_entry(id, status_of(error), 0, 0, 0);
    }
    for (const et::BackendOption& option : options) {
      report.add_option(option);
    }
  }
}

void Agent::reset() {
  for (auto& model : models_) {
    model->clear();
  }
  models_.clear();
  for (const auto& probe : probes_) {
    probe->reset();
  }
}

void Agent::register_probes(const etb_request_t& request, ReportBuilder& report) {
  for (uint8_t i = 0; i < request.backend_count; ++i) {
    auto probe = std::make_unique<ProbeBackend>(std::string(view(request.backends[i].id)));
    const et::Error error = register_unrecorded(et::Backend{probe->name(), probe.get()});
    if (error == et::Error::Ok) {
      report.add_entry(probe->name(), status_of(error), 0, 0, ETB_ENTRY_FLAG_PROBE);
      probes_.push_back(std::move(probe));
    } else {
      // Not in the registry, so nothing refers to it.
      report.add_entry(probe->name(), status_of(error), 0, 0, 0);
    }
  }
}

const RecordingBackend* Agent::recorded(std::string_view name) const {
  return RecordingBackend::recording() && find_probe(name) == nullptr ? find_recorder(name) : nullptr;
}

void Agent::hello(ReportBuilder& report) {
  add_device_facts(report);
  if (RecordingBackend::recording()) {
    // The real backends whose calls this agent records (docs/agent.md, "Records for real backends").
    std::string names;
    for (size_t i = 0; i < recorder_count(); ++i) {
      names += (names.empty() ? "" : ",") + std::string(recorder_at(i).name());
    }
    report.add_fact("recorded", names.substr(0, ETB_MAX_STRING));
  }
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
