// SPDX-License-Identifier: BSD-3-Clause
/*
 * agent.cpp - request handling: one wire-format request in, one report out.
 *
 * A request's options become executorch::runtime::BackendOption arrays
 * (mcu_options.h); LOAD fills a real LoadBackendOptionsMap with them and hands
 * it to the delegate dispatch (mcu_method.h); SET and GET call the registry's
 * set_option/get_option with them. The report shows what the probes read.
 */
#include "mcu_agent.h"

#include <string.h>

#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/interface.h>

#include "mcu_capacity.h"
#include "mcu_clock.h"
#include "mcu_board.h"
#include "mcu_config.h"
#include "mcu_method.h"
#include "mcu_options.h"
#include "mcu_probe.h"
#include "mcu_program.h"

namespace mcu {
namespace {

using executorch::runtime::Backend;
using executorch::runtime::BackendOption;
using executorch::runtime::Error;
using executorch::runtime::get_backend_class;
using executorch::runtime::get_backend_name;
using executorch::runtime::get_num_registered_backends;
using executorch::runtime::LoadBackendOptionsMap;
using executorch::runtime::register_backend;
using executorch::runtime::Span;

#ifdef MCU_RUNTIME_FROM_SOURCE
#define RUNTIME_NAME                                                                   \
  "ExecuTorch " MCU_EXECUTORCH_VERSION " @ " MCU_EXECUTORCH_COMMIT                      \
  ", built from source: Program, Method, backend and operator registries, PAL; no stand-in"
#define CAPABILITIES "load,execute,set,get,reset,register,hello,reboot,program_upload"
#else
#define RUNTIME_NAME                                                                   \
  "STAND-IN registry and dispatch (no ExecuTorch source tree: set ET_HARNESS_SOURCE); " \
  "ExecuTorch " MCU_EXECUTORCH_VERSION " option types and map"
#define CAPABILITIES "load,execute,set,get,reset,register,hello,reboot"
#endif
/* No Module on the MCU: only the Program path, one method. */
#define LOAD_PATHS "program"
constexpr size_t kMessageCap = 512;
constexpr size_t kRegistryCapacity = 16; /* kMaxRegisteredBackends */

etb_request_t request;
DelegateMethod method;

/* The request's options as the runtime's type, each backend's contiguous. */
Span<BackendOption> request_options[ETB_MAX_BACKENDS];
char backend_ids[ETB_MAX_BACKENDS][ETB_MAX_ID + 1u];
char delegate_ids[ETB_MAX_DELEGATES][ETB_MAX_ID + 1u];

uint32_t requests_handled; /* since boot, resent requests answered from the cache excluded */
bool reboot_due;           /* REBOOT answered: reset once its report is acknowledged */

etb_report_t rep;
etb_option_t facts[ETB_MAX_FACTS];
uint8_t text[kMessageCap];

constexpr uint32_t action_bit(etb_action_t action) { return 1u << action; }

/* ---------------------------------------------------------------- report */

void report_start(uint32_t seq, uint8_t action) {
  memset(&rep, 0, sizeof rep);
  rep.seq = seq;
  rep.action = action;
  rep.outcome = ETB_OUTCOME_OK;
  rep.facts = facts;
  rep.message.ptr = text;
}

/* Appends bytes to the message, cut at a UTF-8 character boundary if full. */
void append_bytes(const uint8_t *bytes, size_t len) {
  size_t room = kMessageCap - rep.message.len;
  if (len > room) {
    len = room;
    while (len > 0u && (bytes[len] & 0xC0u) == 0x80u) {
      len--;
    }
  }
  if (len > 0u) {
    memcpy(&text[rep.message.len], bytes, len);
  }
  rep.message.len = static_cast<uint16_t>(rep.message.len + len);
}

void append_text(const char *s) { append_bytes(reinterpret_cast<const uint8_t *>(s), strlen(s)); }

void append_str(etb_str_t s) { append_bytes(s.ptr, s.len); }

void append_number(size_t value) {
  char digits[12];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10u);
    value /= 10u;
  } while (value != 0u);
  while (n > 0u) {
    append_bytes(reinterpret_cast<const uint8_t *>(&digits[--n]), 1u);
  }
}

/* Starts a new clause of the message ("a; b"). */
void message_clause(const char *s) {
  if (rep.message.len > 0u) {
    append_text("; ");
  }
  append_text(s);
}

void report_outcome(uint8_t outcome, uint32_t detail, const char *message) {
  rep.outcome = outcome;
  rep.detail = detail;
  message_clause(message);
}

void report_runtime_error(Error error, const char *message) {
  report_outcome(ETB_OUTCOME_RUNTIME_ERROR, static_cast<uint32_t>(error), message);
}

etb_option_t *next_fact(const char *key) {
  etb_option_t *fact = &facts[rep.fact_count++];
  memset(fact, 0, sizeof *fact);
  fact->key = etb_cstr(key);
  return fact;
}

void fact_int(const char *key, size_t value) {
  etb_option_t *fact = next_fact(key);
  fact->type = ETB_TYPE_INT;
  fact->i = value > static_cast<size_t>(INT32_MAX) ? INT32_MAX : static_cast<int32_t>(value);
}

void fact_text(const char *key, const char *value) {
  etb_option_t *fact = next_fact(key);
  fact->type = ETB_TYPE_STRING;
  fact->s = etb_cstr(value);
}

void add_entry(etb_str_t name, uint32_t status, uint32_t calls, uint32_t executes, uint8_t flags,
               const etb_option_t *options, size_t count) {
  etb_entry_t *entry = &rep.entries[rep.entry_count++];
  entry->name = name;
  entry->status = status;
  entry->calls = static_cast<uint16_t>(calls);
  entry->executes = static_cast<uint16_t>(executes);
  entry->flags = flags;
  entry->model = 0u; /* one program instance per LOAD (max_models 1) */
  entry->options = count > 0u ? options : nullptr;
  entry->option_count = static_cast<uint8_t>(count);
}

/* ---------------------------------------------------------------- the request */

/*
 * Refuses a decoded request beyond this firmware's capacity; otherwise turns its
 * options into BackendOption arrays and its ids into C strings.
 */
bool take_request() {
  const Capacity &cap = capacity();
  BackendOption *next = pools().request;
  for (size_t k = 0; k < request.backend_count; k++) {
    const etb_backend_t &backend = request.backends[k];
    if (backend.option_count > cap.options_per_backend) {
      report_outcome(ETB_OUTCOME_REJECTED, ETB_ERR_CAPACITY, "backend \"");
      append_str(backend.id);
      append_text("\" has ");
      append_number(backend.option_count);
      append_text(" options; this device holds at most ");
      append_number(cap.options_per_backend);
      append_text(" per backend (options_per_backend in HELLO; its RAM holds ");
      append_number(cap.options_per_request);
      append_text(" BackendOptions per request)");
      return false;
    }
    for (size_t i = 0; i < backend.option_count; i++) {
      option_from_wire(backend.options[i], next[i]);
    }
    request_options[k] = Span<BackendOption>(next, backend.option_count);
    next += backend.option_count;
    copy_id(backend.id, backend_ids[k]);
  }
  for (size_t k = 0; k < request.delegate_count; k++) {
    copy_id(request.delegates[k], delegate_ids[k]);
  }
  return true;
}

/* ---------------------------------------------------------------- actions */

/* One entry per probe called in this request, in the order of its first call. */
void add_probe_entries(bool with_received) {
  const Probe *called[kRegistryCapacity + 1u];
  size_t n = probes_called(called, sizeof called / sizeof called[0]);
  for (size_t k = 0; k < n && rep.entry_count < ETB_MAX_BACKENDS; k++) {
    const ProbeRecord &rec = called[k]->record();
    if (!with_received && rec.execute_calls == 0u) {
      continue;
    }
    add_entry(called[k]->name_view(), ETB_OK, with_received ? rec.init_calls : 0u,
              rec.execute_calls, ETB_ENTRY_FLAG_PROBE, with_received ? rec.received : nullptr,
              with_received ? rec.received_count : 0u);
    if (with_received && rec.specs_diverged) {
      message_clause("probe ");
      append_str(called[k]->name_view());
      append_text(": a later init received runtime_specs different from the first");
    }
  }
}

void explain_load_failure(Error error) {
#ifdef MCU_RUNTIME_FROM_SOURCE
  if (method_failure() != nullptr) {
    report_runtime_error(error, method_failure());
    return;
  }
#endif
  if (error == Error::NotFound) {
    for (size_t k = 0; k < request.delegate_count; k++) {
      if (get_backend_class(delegate_ids[k]) == nullptr) {
        report_runtime_error(error, "delegate \"");
        append_str(request.delegates[k]);
        append_text("\" has no registered backend (REGISTER it first)");
        return;
      }
    }
  }
  report_runtime_error(error, "load_method failed");
}

#ifdef MCU_RUNTIME_FROM_SOURCE
extern "C" const uint8_t __runtime_text_start[], __runtime_text_end[], __runtime_data_start[],
    __runtime_data_end[], __runtime_bss_start[], __runtime_bss_end[], __flash_start[],
    __flash_end[], __data_start[], __bss_end[];

struct ImageSizes {
  size_t flash_runtime, flash_total, ram_runtime, ram_total;
};

/* The runtime's share of the image, from the linker's symbols (boards/sections.ld); RAM is
   .data and .bss (the option arena and the stack are announced on their own). */
ImageSizes image_sizes() {
  size_t runtime_data = static_cast<size_t>(__runtime_data_end - __runtime_data_start);
  return ImageSizes{
      static_cast<size_t>(__runtime_text_end - __runtime_text_start) + runtime_data,
      static_cast<size_t>(__flash_end - __flash_start),
      runtime_data + static_cast<size_t>(__runtime_bss_end - __runtime_bss_start),
      static_cast<size_t>(__bss_end - __data_start),
  };
}
#endif

/* What the method's load used of the static arenas (runtime from source only). */
void add_memory_facts() {
#ifdef MCU_RUNTIME_FROM_SOURCE
  const MethodMemory &memory = method_memory();
  fact_int("program_bytes", program_size());
  fact_int("method_allocator_used", memory.method_used);
  fact_int("planned_bytes", memory.planned_bytes);
  fact_int("temp_allocator_used", memory.temp_used);
#endif
}


/* The one method the firmware's delegate list stands for. */
bool is_forward(etb_str_t name) {
  static const char forward[] = "forward";
  return name.len == 0u ||
         (name.len == sizeof forward - 1u && memcmp(name.ptr, forward, name.len) == 0);
}

void do_load() {
  if (request.load.path != ETB_LOAD_PROGRAM) {
    report_outcome(ETB_OUTCOME_UNSUPPORTED, 0u,
                   "this firmware serves load path program only (no extension::Module)");
    return;
  }
  if (request.model_count != 0u || (request.load.flags & ETB_LOAD_FLAG_CONCURRENT) != 0u) {
    report_outcome(ETB_OUTCOME_UNSUPPORTED, 0u,
                   "this firmware holds one program: one model per LOAD (max_models 1)");
    return;
  }
  if ((request.load.flags & ETB_LOAD_FLAG_KEEP) != 0u || !is_forward(request.load.method)) {
    report_outcome(ETB_OUTCOME_UNSUPPORTED, 0u,
                   "this firmware loads one method, forward, afresh: no KEEP, no other method");
    return;
  }
  fact_text("load_path", "program");
  LoadBackendOptionsMap map;
  method.unload(); /* the previous method goes before the new one loads */
  for (size_t k = 0; k < request.backend_count; k++) {
    Error error = map.set_options(backend_ids[k], request_options[k]);
    if (error != Error::Ok) {
      report_runtime_error(error, "LoadBackendOptionsMap::set_options(\"");
      append_str(request.backends[k].id);
      append_text("\") refused the entry");
      return;
    }
  }
  const char *ids[ETB_MAX_DELEGATES];
  for (size_t k = 0; k < request.delegate_count; k++) {
    ids[k] = delegate_ids[k];
  }
  uint32_t start = clock_now();
  Error error = method.load(ids, request.delegate_count, &map);
  fact_int("load_us", clock_elapsed_us(start));
  if (error != Error::Ok) {
    explain_load_failure(error);
  } else {
    start = clock_now();
    error = method.execute();
    fact_int("execute_us", clock_elapsed_us(start));
    if (error != Error::Ok) {
      report_runtime_error(error, "execute failed");
    }
  }
  add_memory_facts();
  add_probe_entries(true);
}

void do_execute() {
  if (!method.loaded()) {
    report_runtime_error(Error::InvalidState, "no program loaded: send LOAD first");
    return;
  }
  uint32_t start = clock_now();
  Error error = method.execute();
  fact_int("execute_us", clock_elapsed_us(start));
  if (error != Error::Ok) {
    report_runtime_error(error, "execute failed");
  }
  add_probe_entries(false);
}

void do_set() {
  for (size_t k = 0; k < request.backend_count; k++) {
    Error error = executorch::runtime::set_option(backend_ids[k], request_options[k]);
    const Probe *probe = probe_of(get_backend_class(backend_ids[k]));
    if (probe != nullptr) {
      add_entry(probe->name_view(), static_cast<uint32_t>(error), probe->record().set_calls, 0,
                ETB_ENTRY_FLAG_PROBE, probe->record().received, probe->record().received_count);
    } else {
      add_entry(request.backends[k].id, static_cast<uint32_t>(error), 0, 0, 0, nullptr, 0);
    }
  }
}

void do_get() {
  for (size_t k = 0; k < request.backend_count; k++) {
    Span<BackendOption> options = request_options[k];
    Error error = executorch::runtime::get_option(backend_ids[k], options);
    /* The codec's views of this backend's options now show what get_option left. */
    etb_option_t *read =
        options.size() > 0u ? &pools().decoded[request.backends[k].options - pools().decoded]
                            : nullptr;
    for (size_t i = 0; i < options.size(); i++) {
      read[i] = option_view(options[i]);
    }
    const Probe *probe = probe_of(get_backend_class(backend_ids[k]));
    if (probe != nullptr) {
      add_entry(probe->name_view(), static_cast<uint32_t>(error), probe->record().get_calls, 0,
                ETB_ENTRY_FLAG_PROBE, read, options.size());
    } else {
      add_entry(request.backends[k].id, static_cast<uint32_t>(error), 0, 0, 0, read,
                options.size());
    }
  }
}

void do_reset() {
  method.unload();
  probes_reset();
}

void do_register() {
  for (size_t k = 0; k < request.backend_count; k++) {
    etb_str_t id = request.backends[k].id;
    Probe *probe = probe_create(id);
    Error error =
        probe != nullptr ? register_backend(Backend{probe->name(), probe}) : Error::Internal;
    if (error == Error::Ok) {
      add_entry(probe->name_view(), ETB_OK, 0, 0, ETB_ENTRY_FLAG_PROBE, nullptr, 0);
    } else {
      add_entry(id, static_cast<uint32_t>(error), 0, 0, 0, nullptr, 0);
      if (probe != nullptr) {
        probe_release(probe);
      }
    }
  }
}

void do_hello() {
  link_stats_t stats = link_stats();
  const Capacity &cap = capacity();
  fact_text("agent_version", MCU_FIRMWARE_VERSION "+" MCU_BUILD_ID);
  fact_int("wire_version", ETB_WIRE_VERSION);
  fact_text("runtime", RUNTIME_NAME);
  fact_text("abi", MCU_ABI);
  fact_text("board", MCU_BOARD_NAME);
  fact_int("max_message", MCU_MAX_MESSAGE);
  fact_int("registry_capacity", kRegistryCapacity);
  fact_text("capabilities", CAPABILITIES);
  fact_text("load_paths", LOAD_PATHS);
  fact_int("max_models", 1);
  fact_int("options_per_backend", cap.options_per_backend);
  fact_int("backends_per_map", cap.backends_per_map);
  fact_int("options_per_request", cap.options_per_request);
  fact_int("backend_option_bytes", sizeof(BackendOption));
  fact_int("option_arena_bytes", cap.arena_bytes);
  fact_int("rx_buffer", MCU_RX_RING_SIZE);
  fact_int("max_frame", MCU_MAX_FRAME);
  fact_int("window", MCU_RX_WINDOW);
  fact_int("link_frames_bad", stats.frames_bad);
  fact_int("link_duplicates", stats.duplicates);
  fact_int("link_replays", stats.replays);
  fact_int("rx_overruns", stats.rx_overruns);
  fact_int("requests_handled", requests_handled);
#ifdef MCU_RUNTIME_FROM_SOURCE
  const MethodMemory &memory = method_memory();
  const ImageSizes sizes = image_sizes();
  fact_int("flash_runtime", sizes.flash_runtime);
  fact_int("flash_rest", sizes.flash_total - sizes.flash_runtime);
  fact_int("ram_runtime", sizes.ram_runtime);
  fact_int("ram_rest", sizes.ram_total - sizes.ram_runtime);
  fact_int("max_program", MCU_PROGRAM_BYTES);
  fact_int("method_arena", memory.method_arena);
  fact_int("planned_arena", memory.planned_arena);
  fact_int("temp_arena", memory.temp_arena);
#endif
  size_t count = get_num_registered_backends();
  for (size_t k = 0; k < count; k++) {
    auto name = get_backend_name(k);
    if (!name.ok()) {
      continue;
    }
    const Probe *probe = probe_of(get_backend_class(name.get()));
    add_entry(probe != nullptr ? probe->name_view() : text_view(name.get()), ETB_OK, 0, 0,
              probe != nullptr ? ETB_ENTRY_FLAG_PROBE : 0u, nullptr, 0);
  }
}

/* ---------------------------------------------------------------- link hooks */

/* Encodes the report; one that does not fit is replaced by a short one that says so. */
size_t finish_report(uint8_t *out, size_t cap) {
  size_t len = 0;
  etb_status_t status = etb_encode_report(&rep, out, cap, &len);
  if (status != ETB_OK) {
    report_start(rep.seq, rep.action);
    report_outcome(ETB_OUTCOME_REJECTED, status, "the report could not be encoded: ");
    append_text(etb_status_name(status));
    append_text(" (larger than the device's report buffer)");
    if (etb_encode_report(&rep, out, cap, &len) != ETB_OK) {
      len = 0;
    }
  }
  return len;
}

/* version: the refused message's version byte, named in a VERSION refusal's message. */
size_t refuse(uint32_t seq, etb_status_t error, uint8_t version, uint8_t *out, size_t cap) {
  report_start(seq, ETB_ACTION_NONE);
  report_outcome(ETB_OUTCOME_REJECTED, error, "request refused by the agent's decoder: ");
  append_text(etb_status_name(error));
  if (error == ETB_ERR_VERSION) {
    append_text(" (the request is wire-format version ");
    append_number(version);
    append_text(", this firmware speaks version ");
    append_number(ETB_WIRE_VERSION);
    append_text(")");
  }
  if (error == ETB_ERR_CAPACITY) {
    append_text(" (more options than the ");
    append_number(capacity().options_per_request);
    append_text(" BackendOptions this device's RAM holds per request: options_per_request "
                "in HELLO)");
  }
  return finish_report(out, cap);
}

size_t reject(uint32_t seq, etb_status_t error, uint8_t *out, size_t cap) {
  return refuse(seq, error, 0, out, cap);
}

uint32_t seq_of(const uint8_t *message, size_t len) {
  if (len < ETB_HEADER_SIZE) {
    return 0;
  }
  return static_cast<uint32_t>(message[12]) | (static_cast<uint32_t>(message[13]) << 8) |
         (static_cast<uint32_t>(message[14]) << 16) | (static_cast<uint32_t>(message[15]) << 24);
}

#ifdef MCU_RUNTIME_FROM_SOURCE
/* PROGRAM_DATA (9) and PROGRAM_END (10): the body after the action byte, before the CRC. */
size_t do_upload(const uint8_t *message, size_t len, uint8_t *out, size_t cap) {
  uint32_t stored = static_cast<uint32_t>(message[len - 4u]) |
                    (static_cast<uint32_t>(message[len - 3u]) << 8) |
                    (static_cast<uint32_t>(message[len - 2u]) << 16) |
                    (static_cast<uint32_t>(message[len - 1u]) << 24);
  if (etb_crc32(0u, message, len - 4u) != stored) {
    return reject(seq_of(message, len), ETB_ERR_CRC, out, cap);
  }
  uint8_t action = message[ETB_HEADER_SIZE];
  const uint8_t *body = &message[ETB_HEADER_SIZE + 1u];
  size_t body_len = len - ETB_HEADER_SIZE - 1u - 4u;
  UploadAnswer answer = action == ETB_ACTION_PROGRAM_DATA ? program_data(body, body_len)
                                                          : program_end(body, body_len);
  report_start(seq_of(message, len), answer.outcome == ETB_OUTCOME_OK ? action : 0u);
  report_outcome(answer.outcome, answer.detail, answer.message);
  fact_int("program_received", program_received());
  fact_int("program_bytes", program_size());
  return finish_report(out, cap);
}
#endif

/*
 * One link message is one unit (docs/wire-format.md, "Stream reading", framed links):
 * decoded whole, with this device's max_message as the limit of step 3.
 */
size_t handle(const uint8_t *message, size_t len, uint8_t *out, size_t cap) {
  etb_header_t header;
  etb_status_t status = etb_peek_header(message, len, MCU_MAX_MESSAGE, ETB_MSG_REQUEST, &header);
  if (status == ETB_OK) {
    status = etb_decode_request(message, len, &request, pools().decoded,
                                capacity().options_per_request);
  }
  requests_handled++;
#ifdef MCU_RUNTIME_FROM_SOURCE
  uint8_t action = len > ETB_HEADER_SIZE + 4u ? message[ETB_HEADER_SIZE] : 0u;
  if (status == ETB_ERR_ACTION &&
      (action == ETB_ACTION_PROGRAM_DATA || action == ETB_ACTION_PROGRAM_END) &&
      etb_peek_header(message, len, MCU_MAX_MESSAGE, ETB_MSG_REQUEST, &header) == ETB_OK &&
      header.length == len) {
    return do_upload(message, len, out, cap);
  }
#endif
  if (status != ETB_OK) {
    return refuse(seq_of(message, len), status, len > 4u ? message[4] : 0u, out, cap);
  }
  probes_begin_request();
  report_start(request.seq, request.action);
  if (!take_request()) {
    rep.action = ETB_ACTION_NONE;
    return finish_report(out, cap);
  }
  switch (request.action) {
    case ETB_ACTION_LOAD:
      do_load();
      break;
    case ETB_ACTION_EXECUTE:
      do_execute();
      break;
    case ETB_ACTION_SET:
      do_set();
      break;
    case ETB_ACTION_GET:
      do_get();
      break;
    case ETB_ACTION_RESET:
      do_reset();
      break;
    case ETB_ACTION_REGISTER:
      do_register();
      break;
    case ETB_ACTION_HELLO:
      do_hello();
      break;
    case ETB_ACTION_REBOOT:
      reboot_due = true;
      break;
    default:
      report_outcome(ETB_OUTCOME_UNSUPPORTED, 0, "action not served by this agent");
      break;
  }
  return finish_report(out, cap);
}

}  // namespace
}  // namespace mcu

#ifdef MCU_RUNTIME_FROM_SOURCE
#include <executorch/runtime/platform/runtime.h>

/* The runtime first (its PAL), as ExecuTorch asks of a program before any other call. */
extern "C" void agent_init(void) {
  executorch::runtime::runtime_init();
  mcu::capacity_init();
}
#else
extern "C" void agent_init(void) { mcu::capacity_init(); }
#endif

extern "C" bool agent_reboot_due(void) { return mcu::reboot_due; }

extern "C" const link_agent_t mcu_agent = {
    mcu::handle,
    mcu::reject,
    mcu::action_bit(ETB_ACTION_LOAD) | mcu::action_bit(ETB_ACTION_EXECUTE) |
        mcu::action_bit(ETB_ACTION_SET) | mcu::action_bit(ETB_ACTION_GET) |
        mcu::action_bit(ETB_ACTION_RESET) | mcu::action_bit(ETB_ACTION_REGISTER) |
        mcu::action_bit(ETB_ACTION_HELLO)
#ifdef MCU_RUNTIME_FROM_SOURCE
        | mcu::action_bit(ETB_ACTION_PROGRAM_DATA) | mcu::action_bit(ETB_ACTION_PROGRAM_END)
#endif
    ,
};
