// SPDX-License-Identifier: BSD-3-Clause
/*
 * agent.cpp - request handling: one wire-format request in, one report out.
 *
 * A request's options become executorch::runtime::BackendOption arrays
 * (mcu_load.h); LOAD and EXECUTE run the models (mcu_load.h, mcu_method.h);
 * SET and GET call the registry's set_option/get_option with them. The report
 * (mcu_report.h) shows what the probes read.
 */
#include "mcu_agent.h"

#include <string.h>

#include <executorch/runtime/backend/interface.h>

#include "mcu_board.h"
#include "mcu_capacity.h"
#include "mcu_config.h"
#include "mcu_load.h"
#include "mcu_method.h"
#include "mcu_options.h"
#include "mcu_probe.h"
#include "mcu_program.h"
#include "mcu_report.h"

namespace mcu {
namespace {

using executorch::runtime::Backend;
using executorch::runtime::BackendOption;
using executorch::runtime::Error;
using executorch::runtime::get_backend_class;
using executorch::runtime::get_backend_name;
using executorch::runtime::get_num_registered_backends;
using executorch::runtime::register_backend;
using executorch::runtime::Span;

#ifdef MCU_RUNTIME_FROM_SOURCE
#define RUNTIME_NAME                                               \
  "ExecuTorch " MCU_EXECUTORCH_VERSION " @ " MCU_EXECUTORCH_COMMIT \
  ", built from source: Program, Method, backend and operator registries, PAL; no stand-in"
#define CAPABILITIES "load,execute,set,get,reset,register,hello,reboot,program_upload"
#define LOAD_FLAGS "keep"
#else
#define RUNTIME_NAME                                                                    \
  "STAND-IN registry and dispatch (no ExecuTorch source tree: set ET_HARNESS_SOURCE); " \
  "ExecuTorch " MCU_EXECUTORCH_VERSION " option types and map"
#define CAPABILITIES "load,execute,set,get,reset,register,hello,reboot"
#define LOAD_FLAGS ""
#endif
/* No extension::Module on the MCU (it needs a file system and the heap): the Program path. */
#define LOAD_PATHS "program"
#define DIRECTIVES "etb.dup:,etb.id_suffix"
constexpr size_t kRegistryCapacity = 16; /* kMaxRegisteredBackends */

etb_request_t request;

uint32_t requests_handled; /* since boot, resent requests answered from the cache excluded */
bool reboot_due;           /* REBOOT answered: reset once its report is acknowledged */

constexpr uint32_t action_bit(etb_action_t action) { return 1u << action; }

/* ---------------------------------------------------------------- actions */

#ifdef MCU_RUNTIME_FROM_SOURCE
extern "C" const uint8_t __runtime_text_start[], __runtime_text_end[], __runtime_data_start[], __runtime_data_end[],
    __runtime_bss_start[], __runtime_bss_end[], __flash_start[], __flash_end[], __data_start[], __bss_end[];

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

/* "programs 4 x 3072 B, method 4096 B, planned 1024 B, temp 256 B": the program slots and the
   static arenas the methods' allocators use (one fact: a report holds 32). */
const char* arenas_text() {
  static char text[96];
  const MethodMemory& memory = method_memory();
  size_t len = 0;
  const char* labels[] = {"programs ", " x ", " B, method ", " B, planned ", " B, temp ", " B"};
  const size_t sizes[] = {MCU_PROGRAM_SLOTS, MCU_PROGRAM_BYTES, memory.method_arena, memory.planned_arena,
                          memory.temp_arena};
  for (size_t k = 0; k < 6u; k++) {
    for (const char* c = labels[k]; *c != '\0' && len < sizeof text - 1u; c++) {
      text[len++] = *c;
    }
    if (k < 5u) {
      char digits[12];
      size_t n = 0;
      size_t value = sizes[k];
      do {
        digits[n++] = static_cast<char>('0' + value % 10u);
        value /= 10u;
      } while (value != 0u);
      while (n > 0u && len < sizeof text - 1u) {
        text[len++] = digits[--n];
      }
    }
  }
  text[len] = '\0';
  return text;
}
#endif

void do_set() {
  for (size_t k = 0; k < request.backend_count; k++) {
    Error error = executorch::runtime::set_option(request_id(k), request_options(k));
    const Probe* probe = probe_of(get_backend_class(request_id(k)));
    if (probe != nullptr) {
      add_entry(probe->name_view(), static_cast<uint32_t>(error), probe->record().set_calls, 0, ETB_ENTRY_FLAG_PROBE,
                probe->record().received, probe->record().received_count);
    } else {
      add_entry(request.backends[k].id, static_cast<uint32_t>(error), 0, 0, 0, nullptr, 0);
    }
  }
}

void do_get() {
  for (size_t k = 0; k < request.backend_count; k++) {
    Span<BackendOption> options = request_options(k);
    Error error = executorch::runtime::get_option(request_id(k), options);
    /* The codec's views of this backend's options now show what get_option left. */
    etb_option_t* read =
        options.size() > 0u ? &pools().decoded[request.backends[k].options - pools().decoded] : nullptr;
    for (size_t i = 0; i < options.size(); i++) {
      read[i] = option_view(options[i]);
    }
    const Probe* probe = probe_of(get_backend_class(request_id(k)));
    if (probe != nullptr) {
      add_entry(probe->name_view(), static_cast<uint32_t>(error), probe->record().get_calls, 0, ETB_ENTRY_FLAG_PROBE,
                read, options.size());
    } else {
      add_entry(request.backends[k].id, static_cast<uint32_t>(error), 0, 0, 0, read, options.size());
    }
  }
}

void do_reset() {
  loads_reset();
  probes_reset();
}

void do_register() {
  for (size_t k = 0; k < request.backend_count; k++) {
    etb_str_t id = request.backends[k].id;
    Probe* probe = probe_create(id);
    Error error = probe != nullptr ? register_backend(Backend{probe->name(), probe}) : Error::Internal;
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
  const Capacity& cap = capacity();
  fact_text("agent_version", MCU_FIRMWARE_VERSION "+" MCU_BUILD_ID);
  fact_int("wire_version", ETB_WIRE_VERSION);
  fact_text("runtime", RUNTIME_NAME);
  fact_text("abi", MCU_ABI);
  fact_text("board", MCU_BOARD_NAME);
  fact_int("max_message", MCU_MAX_MESSAGE);
  fact_int("registry_capacity", kRegistryCapacity);
  fact_text("capabilities", CAPABILITIES);
  fact_text("load_paths", LOAD_PATHS);
  if (LOAD_FLAGS[0] != '\0') {
    fact_text("load_flags", LOAD_FLAGS);
  }
  fact_int("max_models", MCU_MAX_MODELS);
  fact_bool("concurrent", false);
  fact_text("directives", DIRECTIVES);
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
  const ImageSizes sizes = image_sizes();
  fact_int("flash_runtime", sizes.flash_runtime);
  fact_int("flash_rest", sizes.flash_total - sizes.flash_runtime);
  fact_int("ram_runtime", sizes.ram_runtime);
  fact_int("ram_rest", sizes.ram_total - sizes.ram_runtime);
  fact_int("max_program", MCU_PROGRAM_BYTES);
  fact_text("arenas", arenas_text());
#endif
  size_t count = get_num_registered_backends();
  for (size_t k = 0; k < count; k++) {
    auto name = get_backend_name(k);
    if (!name.ok()) {
      continue;
    }
    const Probe* probe = probe_of(get_backend_class(name.get()));
    add_entry(probe != nullptr ? probe->name_view() : text_view(name.get()), ETB_OK, 0, 0,
              probe != nullptr ? ETB_ENTRY_FLAG_PROBE : 0u, nullptr, 0);
  }
}

/* ---------------------------------------------------------------- link hooks */

/* version: the refused message's version byte, named in a VERSION refusal's message. */
size_t refuse(uint32_t seq, etb_status_t error, uint8_t version, uint8_t* out, size_t cap) {
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
    append_text(
        " BackendOptions this device's RAM holds per request: options_per_request "
        "in HELLO)");
  }
  return finish_report(out, cap);
}

/* Every refusal drops the upload under way, whatever the request's action: the bytes of a
   damaged chunk may not even say that it is one (docs/wire-format.md, "Program upload"). */
size_t answered(size_t len) {
#ifdef MCU_RUNTIME_FROM_SOURCE
  if (report_rejected()) {
    program_drop_upload();
  }
#endif
  return len;
}

size_t reject(uint32_t seq, etb_status_t error, uint8_t* out, size_t cap) {
  return answered(refuse(seq, error, 0, out, cap));
}

uint32_t seq_of(const uint8_t* message, size_t len) {
  if (len < ETB_HEADER_SIZE) {
    return 0;
  }
  return static_cast<uint32_t>(message[12]) | (static_cast<uint32_t>(message[13]) << 8) |
         (static_cast<uint32_t>(message[14]) << 16) | (static_cast<uint32_t>(message[15]) << 24);
}

#ifdef MCU_RUNTIME_FROM_SOURCE
/* PROGRAM_DATA (9) and PROGRAM_END (10), read by the codec's upload decoder. */
size_t do_upload(const uint8_t* message, size_t len, uint8_t* out, size_t cap) {
  etb_upload_t upload;
  etb_status_t status = etb_decode_upload(message, len, &upload);
  if (status != ETB_OK) {
    return refuse(seq_of(message, len), status, 0, out, cap);
  }
  /* A new upload replaces the least recently used program; if loaded models use it they go
     first (the LOAD that follows would unload them anyway): never a program under a method. */
  bool unloaded = false;
  if (upload.action == ETB_ACTION_PROGRAM_DATA && upload.offset == 0u && !program_slot_free()) {
    loads_reset();
    unloaded = true;
  }
  UploadAnswer answer = upload.action == ETB_ACTION_PROGRAM_DATA
                            ? program_data(upload.offset, upload.chunk.ptr, upload.chunk.len)
                            : program_end(upload.size, upload.crc);
  uint8_t action = upload.action;
  report_start(upload.seq, answer.outcome == ETB_OUTCOME_OK ? action : 0u);
  report_outcome(answer.outcome, answer.detail, answer.message);
  if (unloaded) {
    message_clause(
        "the loaded models were unloaded: the upload replaces the least recently "
        "used program, theirs");
  }
  fact_int("program_received", program_received());
  fact_int("program_bytes", program_last_size());
  fact_text("programs_held", programs_held());
  return finish_report(out, cap);
}
#endif

/*
 * One link message is one unit (docs/wire-format.md, "Stream reading", framed links):
 * decoded whole, with this device's max_message as the limit of step 3.
 */
size_t answer(const uint8_t* message, size_t len, uint8_t* out, size_t cap) {
  etb_header_t header;
  etb_status_t status = etb_peek_header(message, len, MCU_MAX_MESSAGE, ETB_MSG_REQUEST, &header);
  if (status == ETB_OK) {
    status = etb_decode_request(message, len, &request, pools().decoded, capacity().options_per_request);
  }
  requests_handled++;
#ifdef MCU_RUNTIME_FROM_SOURCE
  /* ACTION comes after the header and CRC checks: the action byte is the sender's. */
  uint8_t action = len > ETB_HEADER_SIZE ? message[ETB_HEADER_SIZE] : 0u;
  if (status == ETB_ERR_ACTION && (action == ETB_ACTION_PROGRAM_DATA || action == ETB_ACTION_PROGRAM_END)) {
    return do_upload(message, len, out, cap);
  }
#endif
  if (status != ETB_OK) {
    return refuse(seq_of(message, len), status, len > 4u ? message[4] : 0u, out, cap);
  }
  probes_begin_request();
  report_start(request.seq, request.action);
  if (!take_request(request)) {
    report_set_action(ETB_ACTION_NONE);
    return finish_report(out, cap);
  }
  switch (request.action) {
    case ETB_ACTION_LOAD:
      do_load(request);
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

size_t handle(const uint8_t* message, size_t len, uint8_t* out, size_t cap) {
  return answered(answer(message, len, out, cap));
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
    mcu::action_bit(ETB_ACTION_LOAD) | mcu::action_bit(ETB_ACTION_EXECUTE) | mcu::action_bit(ETB_ACTION_SET) |
        mcu::action_bit(ETB_ACTION_GET) | mcu::action_bit(ETB_ACTION_RESET) | mcu::action_bit(ETB_ACTION_REGISTER) |
        mcu::action_bit(ETB_ACTION_HELLO)
#ifdef MCU_RUNTIME_FROM_SOURCE
        | mcu::action_bit(ETB_ACTION_PROGRAM_DATA) | mcu::action_bit(ETB_ACTION_PROGRAM_END)
#endif
        ,
};
