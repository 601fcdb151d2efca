// SPDX-License-Identifier: BSD-3-Clause
/* load.cpp - options of a request, LOAD and EXECUTE (see mcu_load.h). */
#include "mcu_load.h"

#include <string.h>

#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/interface.h>

#include "mcu_capacity.h"
#include "mcu_clock.h"
#include "mcu_method.h"
#include "mcu_options.h"
#include "mcu_probe.h"
#include "mcu_program.h"
#include "mcu_report.h"

namespace mcu {
namespace {

using executorch::runtime::BackendOption;
using executorch::runtime::get_backend_class;
using executorch::runtime::Span;

constexpr char kDup[] = "etb.dup:";
constexpr char kIdSuffix[] = "etb.id_suffix";
constexpr char kForward[] = "forward";
constexpr size_t kMapIdCap = ETB_MAX_ID + ETB_MAX_STRING + 1u;
constexpr size_t kProbeEntriesCap = 17; /* every probe the pool holds */

/* One backend list entry as the runtime gets it: its options and the id suffix directive. */
struct TakenBackend {
  BackendOption* options; /* (a span would give the arrays below a static constructor) */
  size_t count;
  etb_str_t suffix;

  Span<BackendOption> span() const { return Span<BackendOption>(options, count); }
};

/* The fields of one model of a LOAD (model 0: the request's own; k: models[k - 1]). */
struct ModelView {
  etb_str_t program;
  size_t delegate_count;
  const etb_str_t* delegates;
  size_t backend_count;
  const etb_backend_t* backends;
  const etb_load_t* load;
  TakenBackend* taken;
};

TakenBackend own_backends[ETB_MAX_BACKENDS];
TakenBackend model_backends[MCU_MAX_MODELS - 1u][ETB_MAX_LOAD_BACKENDS];
char backend_ids[ETB_MAX_BACKENDS][ETB_MAX_ID + 1u];
size_t loaded_models; /* of the last LOAD without KEEP */

bool is_key(etb_str_t key, const char* name, bool prefix) {
  size_t n = strlen(name);
  return (prefix ? key.len >= n : key.len == n) && memcmp(key.ptr, name, n) == 0;
}

ModelView view_of(const etb_request_t& request, size_t model) {
  if (model == 0u) {
    return {request.program,  request.delegate_count, request.delegates, request.backend_count,
            request.backends, &request.load,          own_backends};
  }
  const etb_model_t& m = request.models[model - 1u];
  return {m.program, m.delegate_count, m.delegates, m.backend_count, m.backends, &m.load, model_backends[model - 1u]};
}

bool refuse_capacity(const etb_backend_t& backend) {
  const Capacity& cap = capacity();
  if (backend.option_count <= cap.options_per_backend) {
    return false;
  }
  report_outcome(ETB_OUTCOME_REJECTED, ETB_ERR_CAPACITY, "backend \"");
  append_str(backend.id);
  append_text("\" has ");
  append_number(backend.option_count);
  append_text(" options; this device holds at most ");
  append_number(cap.options_per_backend);
  append_text(" per backend (options_per_backend in HELLO; its RAM holds ");
  append_number(cap.options_per_request);
  append_text(" BackendOptions per request)");
  return true;
}

/* The backend's options from `*next` on, directives applied when `directives`. */
TakenBackend take_backend(const etb_backend_t& backend, BackendOption** next, bool directives) {
  TakenBackend taken{*next, 0u, etb_str_t{}};
  size_t n = 0;
  for (size_t i = 0; i < backend.option_count; i++) {
    const etb_option_t& option = backend.options[i];
    if (directives && option.type == ETB_TYPE_STRING && is_key(option.key, kIdSuffix, false)) {
      taken.suffix = option.s;
      continue;
    }
    BackendOption& out = (*next)[n++];
    option_from_wire(option, out);
    if (directives && is_key(option.key, kDup, true)) {
      memmove(out.key, out.key + sizeof kDup - 1u, option.key.len - (sizeof kDup - 1u) + 1u);
    }
  }
  taken.count = n;
  *next += n;
  return taken;
}

/* The model's map: each backend's id (with its suffix) and options. On failure `id` holds the
   id set_options refused and the error is returned. */
Error build_map(const ModelView& model, LoadBackendOptionsMap& map, char (&id)[kMapIdCap], size_t& len) {
  for (size_t k = 0; k < model.backend_count; k++) {
    len = 0;
    for (etb_str_t part : {model.backends[k].id, model.taken[k].suffix}) {
      size_t n = part.len < kMapIdCap - 1u - len ? part.len : kMapIdCap - 1u - len;
      memcpy(&id[len], part.ptr, n);
      len += n;
    }
    id[len] = '\0';
    Error error = map.set_options(id, model.taken[k].span());
    if (error != Error::Ok) {
      return error;
    }
  }
  return Error::Ok;
}

/* Starts the report of model k's failure: the outcome at the first, "model K: " when several. */
void begin_failure(size_t model, bool several, Error error, bool first) {
  const char* prefix = several ? "model " : "";
  if (first) {
    report_outcome(ETB_OUTCOME_RUNTIME_ERROR, static_cast<uint32_t>(error), prefix);
  } else {
    message_clause(prefix);
  }
  if (several) {
    append_number(model);
    append_text(": ");
  }
}

/* Ends it: a later failure's Error code, as (0xNN). */
void end_failure(Error error, bool first) {
  static const char hex[] = "0123456789abcdef";
  if (!first) {
    uint32_t code = static_cast<uint32_t>(error);
    char text[] = " (0x00)";
    text[4] = hex[(code >> 4) & 0xFu];
    text[5] = hex[code & 0xFu];
    append_text(text);
  }
}

void explain_load_failure(const ModelView& model, const char* const* ids, const char* method, bool keep, Error error) {
  if (model_failure() != nullptr) {
    append_text(model_failure());
    if (keep && error == Error::InvalidArgument) {
      append_text(" (the loaded program is ");
      append_text(model_program(0));
      append_text(")");
    }
    return;
  }
  if (error == Error::NotFound) {
    for (size_t k = 0; k < model.delegate_count; k++) {
      if (get_backend_class(ids[k]) == nullptr) {
        append_text("delegate \"");
        append_str(model.delegates[k]);
        append_text("\" has no registered backend (REGISTER it first)");
        return;
      }
    }
  }
  append_text("load_method(\"");
  append_text(method);
  append_text("\") failed");
}

/* Model 0's measurements, as the report's facts. */
struct Timing {
  size_t load_us, execute_us;
  bool loaded, executed;
};

/* Loads model k (its map, the load, one execute); false with its failure in the report. */
bool load_model(const etb_request_t& request, size_t k, bool keep, bool several, bool first, Timing& timing) {
  const ModelView model = view_of(request, k);
  char ids[ETB_MAX_DELEGATES][ETB_MAX_ID + 1u];
  const char* id_list[ETB_MAX_DELEGATES];
  for (size_t i = 0; i < model.delegate_count; i++) {
    copy_id(model.delegates[i], ids[i]);
    id_list[i] = ids[i];
  }
  char method[ETB_MAX_ID + 1u];
  copy_id(model.load->method.len != 0u ? model.load->method : etb_cstr(kForward), method);
  LoadBackendOptionsMap map;
  char refused[kMapIdCap];
  size_t refused_len = 0;
  Error error = build_map(model, map, refused, refused_len);
  if (error != Error::Ok) {
    begin_failure(k, several, error, first);
    append_text("LoadBackendOptionsMap::set_options(\"");
    append_text(refused);
    append_text("\") refused the entry (id of ");
    append_number(refused_len);
    append_text(" bytes)");
    end_failure(error, first);
    return false;
  }
  uint32_t start = clock_now();
  ModelLoad load{k, model.program, method, id_list, model.delegate_count, &map, keep};
  error = model_load(load);
  if (k == 0u) {
    timing.load_us = clock_elapsed_us(start);
    timing.loaded = true;
  }
  if (error != Error::Ok) {
    begin_failure(k, several, error, first);
    explain_load_failure(model, id_list, method, keep, error);
    end_failure(error, first);
    return false;
  }
  start = clock_now();
  error = model_execute(k);
  if (k == 0u) {
    timing.execute_us = clock_elapsed_us(start);
    timing.executed = true;
  }
  if (error != Error::Ok) {
    begin_failure(k, several, error, first);
    append_text("execute failed");
    end_failure(error, first);
    return false;
  }
  return true;
}

/* One entry per probe called for `model`, in the order of its first call. */
void add_probe_entries(size_t model, bool several, bool with_received) {
  const Probe* called[kProbeEntriesCap];
  size_t n = probes_called(model, called, kProbeEntriesCap);
  for (size_t k = 0; k < n; k++) {
    const ProbeRecord& rec = called[k]->record(model);
    if (!with_received && rec.execute_calls == 0u) {
      continue;
    }
    add_entry(called[k]->name_view(), ETB_OK, with_received ? rec.init_calls : 0u, rec.execute_calls,
              ETB_ENTRY_FLAG_PROBE, with_received ? rec.received : nullptr, with_received ? rec.received_count : 0u,
              static_cast<uint8_t>(model));
    if (with_received && rec.specs_diverged) {
      message_clause("probe ");
      append_str(called[k]->name_view());
      if (several) {
        append_text(" in model ");
        append_number(model);
      }
      append_text(": a later init received runtime_specs different from the first");
    }
  }
}

/* What the loads used of the static arenas (runtime from source only). */
void add_memory_facts(const etb_request_t& request) {
#ifdef MCU_RUNTIME_FROM_SOURCE
  const MethodMemory& memory = method_memory();
  fact_int("program_bytes", program_size(program_find(request.program)));
  fact_int("method_allocator_used", memory.method_used);
  fact_int("planned_bytes", memory.planned_bytes);
  fact_int("temp_allocator_used", memory.temp_used);
#else
  (void)request;
#endif
}

/* A LOAD this firmware does not serve: UNSUPPORTED, nothing loaded. */
bool refuse_load(const etb_request_t& request, size_t count, bool keep) {
  for (size_t k = 0; k < count; k++) {
    if (view_of(request, k).load->path != ETB_LOAD_PROGRAM) {
      report_outcome(ETB_OUTCOME_UNSUPPORTED, 0u,
                     "this firmware serves load path program only: extension::Module needs a "
                     "file system and a heap (load_paths in HELLO)");
      return true;
    }
  }
  if ((request.load.flags & ETB_LOAD_FLAG_CONCURRENT) != 0u) {
    report_outcome(ETB_OUTCOME_UNSUPPORTED, 0u,
                   "this firmware has no threads: it loads the models of a LOAD one after "
                   "another (concurrent false in HELLO)");
    return true;
  }
  if (keep && count > 1u) {
    report_outcome(ETB_OUTCOME_UNSUPPORTED, 0u, "KEEP loads into the one program loaded before: a LOAD of ");
    append_number(count);
    append_text(" models loads each afresh");
    return true;
  }
#ifndef MCU_RUNTIME_FROM_SOURCE
  for (size_t k = 0; k < count; k++) {
    etb_str_t method = view_of(request, k).load->method;
    if (keep || !(method.len == 0u || is_key(method, kForward, false))) {
      report_outcome(ETB_OUTCOME_UNSUPPORTED, 0u,
                     "the stand-in loads one method, forward, afresh: no KEEP, no other method "
                     "(no ExecuTorch source tree; load_flags in HELLO)");
      return true;
    }
  }
#endif
  return false;
}

}  // namespace

bool take_request(const etb_request_t& request) {
  const bool directives = request.action == ETB_ACTION_LOAD;
  const size_t models = directives ? request.model_count + 1u : 1u;
  for (size_t m = 0; m < models; m++) {
    const ModelView model = view_of(request, m);
    for (size_t k = 0; k < model.backend_count; k++) {
      if (refuse_capacity(model.backends[k])) {
        return false;
      }
    }
  }
  BackendOption* next = pools().request;
  for (size_t m = 0; m < models; m++) {
    const ModelView model = view_of(request, m);
    for (size_t k = 0; k < model.backend_count; k++) {
      model.taken[k] = take_backend(model.backends[k], &next, directives);
      if (m == 0u) {
        copy_id(model.backends[k].id, backend_ids[k]);
      }
    }
  }
  return true;
}

Span<BackendOption> request_options(size_t k) { return own_backends[k].span(); }

const char* request_id(size_t k) { return backend_ids[k]; }

void do_load(const etb_request_t& request) {
  const size_t count = request.model_count + 1u;
  const bool keep = (request.load.flags & ETB_LOAD_FLAG_KEEP) != 0u;
  const bool several = count > 1u;
  if (refuse_load(request, count, keep)) {
    return;
  }
  fact_text("load_path", "program");
  if (several) {
    fact_int("models", count);
  }
  if (!keep) {
    models_unload(); /* the previous models go before the new ones load */
    loaded_models = count;
  }
  Timing timing{};
  bool failed = false;
  for (size_t k = 0; k < count; k++) {
    probes_set_model(k);
    failed = !load_model(request, k, keep, several, !failed, timing) || failed;
  }
  probes_set_model(0);
  if (timing.loaded) {
    fact_int("load_us", timing.load_us);
  }
  if (timing.executed) {
    fact_int("execute_us", timing.execute_us);
  }
  add_memory_facts(request);
  for (size_t k = 0; k < count; k++) {
    add_probe_entries(k, several, true);
  }
}

void do_execute() {
  bool any = false;
  for (size_t k = 0; k < loaded_models; k++) {
    any = any || model_has_method(k);
  }
  if (!any) {
    report_runtime_error(Error::InvalidState, "no program loaded: send LOAD first");
    return;
  }
  const bool several = loaded_models > 1u;
  bool failed = false;
  size_t execute_us = 0;
  for (size_t k = 0; k < loaded_models; k++) {
    probes_set_model(k);
    uint32_t start = clock_now();
    Error error = model_has_method(k) ? model_execute(k) : Error::InvalidState;
    if (k == 0u) {
      execute_us = clock_elapsed_us(start);
    }
    if (error != Error::Ok) {
      begin_failure(k, several, error, !failed);
      append_text(model_has_method(k) ? "execute failed" : "no method loaded: its LOAD failed");
      end_failure(error, !failed);
      failed = true;
    }
  }
  probes_set_model(0);
  fact_int("execute_us", execute_us);
  for (size_t k = 0; k < loaded_models; k++) {
    add_probe_entries(k, several, false);
  }
}

void loads_reset() {
  models_unload();
  loaded_models = 0;
}

}  // namespace mcu
