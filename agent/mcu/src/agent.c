/* agent.c - request handling: one wire-format request in, one report out. */
#include "mcu_agent.h"

#include <string.h>

#include "etb_backend_seam.h"
#include "mcu_clock.h"
#include "mcu_config.h"
#include "mcu_probe.h"

#define RUNTIME_NAME "etb-mcu-registry (ExecuTorch stand-in)"
#define ABI "armv7m"
#define CAPABILITIES "load,execute,set,get,reset,register,hello"
/* No Module on the MCU: only the Program path, one method. */
#define LOAD_PATHS "program"
#define MESSAGE_CAP 512u
#define ACTION_BIT(a) (1u << (a))

static etb_request_t request;
static etb_option_t pool[MCU_OPTION_POOL];
static etb_method_t method;

static uint32_t requests_handled; /* since boot, resent requests answered from the cache excluded */

static etb_report_t rep;
static etb_option_t facts[ETB_MAX_FACTS];
static uint8_t text[MESSAGE_CAP];

/* ---------------------------------------------------------------- report */

static void report_start(uint32_t seq, uint8_t action) {
  memset(&rep, 0, sizeof rep);
  rep.seq = seq;
  rep.action = action;
  rep.outcome = ETB_OUTCOME_OK;
  rep.facts = facts;
  rep.message.ptr = text;
}

/* Appends bytes to the message, cut at a UTF-8 character boundary if full. */
static void append_bytes(const uint8_t *bytes, size_t len) {
  size_t room = MESSAGE_CAP - rep.message.len;
  if (len > room) {
    len = room;
    while (len > 0u && (bytes[len] & 0xC0u) == 0x80u) {
      len--;
    }
  }
  if (len > 0u) {
    memcpy(&text[rep.message.len], bytes, len);
  }
  rep.message.len = (uint16_t)(rep.message.len + len);
}

static void append_text(const char *s) { append_bytes((const uint8_t *)s, strlen(s)); }

static void append_str(etb_str_t s) { append_bytes(s.ptr, s.len); }

/* Starts a new clause of the message ("a; b"). */
static void message_clause(const char *s) {
  if (rep.message.len > 0u) {
    append_text("; ");
  }
  append_text(s);
}

static void report_outcome(uint8_t outcome, uint32_t detail, const char *message) {
  rep.outcome = outcome;
  rep.detail = detail;
  message_clause(message);
}

static etb_option_t *next_fact(const char *key) {
  etb_option_t *fact = &facts[rep.fact_count++];
  memset(fact, 0, sizeof *fact);
  fact->key = etb_cstr(key);
  return fact;
}

static void fact_int(const char *key, int32_t value) {
  etb_option_t *fact = next_fact(key);
  fact->type = ETB_TYPE_INT;
  fact->i = value;
}

static void fact_text(const char *key, const char *value) {
  etb_option_t *fact = next_fact(key);
  fact->type = ETB_TYPE_STRING;
  fact->s = etb_cstr(value);
}

static void add_entry(etb_str_t name, uint32_t status, uint32_t calls, uint32_t executes,
                      uint8_t flags, const etb_option_t *options, size_t count) {
  etb_entry_t *entry = &rep.entries[rep.entry_count++];
  entry->name = name;
  entry->status = status;
  entry->calls = (uint16_t)calls;
  entry->executes = (uint16_t)executes;
  entry->flags = flags;
  entry->options = count > 0u ? options : NULL;
  entry->option_count = (uint8_t)count;
}

static int32_t clamp_us(uint32_t us) { return us > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)us; }

/* ---------------------------------------------------------------- actions */

/* One entry per probe called in this request, in the order of its first call. */
static void add_probe_entries(bool with_received) {
  const probe_t *called[ETB_SEAM_MAX_BACKENDS + 1u];
  size_t n = probes_called(called, sizeof called / sizeof called[0]);
  size_t k;
  for (k = 0; k < n && rep.entry_count < ETB_MAX_BACKENDS; k++) {
    const probe_record_t *rec = &called[k]->record;
    if (!with_received && rec->execute_calls == 0u) {
      continue;
    }
    add_entry(probe_name(called[k]), ETB_RT_OK, with_received ? rec->init_calls : 0u,
              rec->execute_calls, ETB_ENTRY_FLAG_PROBE, with_received ? rec->received : NULL,
              with_received ? rec->received_count : 0u);
    if (with_received && rec->specs_diverged) {
      message_clause("probe ");
      append_str(probe_name(called[k]));
      append_text(": a later init received runtime_specs different from the first");
    }
  }
}

static void explain_load_failure(etb_rt_error_t error) {
  size_t k;
  if (error == ETB_RT_NOT_FOUND) {
    for (k = 0; k < request.delegate_count; k++) {
      if (etb_seam_get_backend_class(request.delegates[k]) == NULL) {
        report_outcome(ETB_OUTCOME_RUNTIME_ERROR, error, "delegate \"");
        append_str(request.delegates[k]);
        append_text("\" has no registered backend (REGISTER it first)");
        return;
      }
    }
  }
  report_outcome(ETB_OUTCOME_RUNTIME_ERROR, error, "load_method failed");
}

/* The one method the firmware's delegate list stands for. */
static bool is_forward(etb_str_t method) {
  static const char forward[] = "forward";
  return method.len == 0u ||
         (method.len == sizeof forward - 1u && memcmp(method.ptr, forward, method.len) == 0);
}

static void do_load(void) {
  etb_load_options_map_t map;
  etb_rt_error_t error = ETB_RT_OK;
  uint32_t start;
  size_t k;
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
  etb_seam_unload(&method); /* the previous method goes before the new one loads */
  etb_map_init(&map);
  for (k = 0; k < request.backend_count; k++) {
    const etb_backend_t *backend = &request.backends[k];
    error = etb_map_set_options(&map, backend->id, backend->options, backend->option_count);
    if (error != ETB_RT_OK) {
      report_outcome(ETB_OUTCOME_RUNTIME_ERROR, error, "LoadBackendOptionsMap::set_options(\"");
      append_str(backend->id);
      append_text("\") refused the entry");
      return;
    }
  }
  start = clock_now();
  error = etb_seam_load_method(&method, request.delegates, request.delegate_count, &map);
  fact_int("load_us", clamp_us(clock_elapsed_us(start)));
  if (error != ETB_RT_OK) {
    explain_load_failure(error);
  } else {
    start = clock_now();
    error = etb_seam_execute(&method);
    fact_int("execute_us", clamp_us(clock_elapsed_us(start)));
    if (error != ETB_RT_OK) {
      report_outcome(ETB_OUTCOME_RUNTIME_ERROR, error, "execute failed");
    }
  }
  add_probe_entries(true);
}

static void do_execute(void) {
  uint32_t start;
  etb_rt_error_t error;
  if (!method.loaded) {
    report_outcome(ETB_OUTCOME_RUNTIME_ERROR, ETB_RT_INVALID_STATE,
                   "no program loaded: send LOAD first");
    return;
  }
  start = clock_now();
  error = etb_seam_execute(&method);
  fact_int("execute_us", clamp_us(clock_elapsed_us(start)));
  if (error != ETB_RT_OK) {
    report_outcome(ETB_OUTCOME_RUNTIME_ERROR, error, "execute failed");
  }
  add_probe_entries(false);
}

static void do_set(void) {
  size_t k;
  for (k = 0; k < request.backend_count; k++) {
    const etb_backend_t *backend = &request.backends[k];
    etb_rt_error_t error = etb_seam_set_option(backend->id, backend->options, backend->option_count);
    const probe_t *probe = probe_of(etb_seam_get_backend_class(backend->id));
    if (probe != NULL) {
      add_entry(probe_name(probe), error, probe->record.set_calls, 0, ETB_ENTRY_FLAG_PROBE,
                probe->record.received, probe->record.received_count);
    } else {
      add_entry(backend->id, error, 0, 0, 0, NULL, 0);
    }
  }
}

static void do_get(void) {
  size_t k;
  for (k = 0; k < request.backend_count; k++) {
    const etb_backend_t *backend = &request.backends[k];
    /* The options live in this file's pool: get_option overwrites them in place. */
    etb_option_t *options = backend->option_count > 0u ? &pool[backend->options - pool] : NULL;
    etb_rt_error_t error = etb_seam_get_option(backend->id, options, backend->option_count);
    const probe_t *probe = probe_of(etb_seam_get_backend_class(backend->id));
    if (probe != NULL) {
      add_entry(probe_name(probe), error, probe->record.get_calls, 0, ETB_ENTRY_FLAG_PROBE,
                options, backend->option_count);
    } else {
      add_entry(backend->id, error, 0, 0, 0, options, backend->option_count);
    }
  }
}

static void do_reset(void) {
  etb_seam_unload(&method);
  probes_reset();
}

static void do_register(void) {
  size_t k;
  for (k = 0; k < request.backend_count; k++) {
    etb_str_t id = request.backends[k].id;
    probe_t *probe = probe_create(id);
    etb_rt_error_t error =
        probe != NULL ? etb_seam_register_backend(probe_backend(probe)) : ETB_RT_INTERNAL;
    if (error == ETB_RT_OK) {
      add_entry(probe_name(probe), error, 0, 0, ETB_ENTRY_FLAG_PROBE, NULL, 0);
    } else {
      add_entry(id, error, 0, 0, 0, NULL, 0);
      if (probe != NULL) {
        probe_release(probe);
      }
    }
  }
}

static void do_hello(void) {
  link_stats_t stats = link_stats();
  size_t count = etb_seam_backend_count();
  size_t k;
  fact_text("agent_version", MCU_FIRMWARE_VERSION "+" MCU_BUILD_ID);
  fact_int("wire_version", (int32_t)ETB_WIRE_VERSION);
  fact_text("runtime", RUNTIME_NAME);
  fact_text("abi", ABI);
  fact_int("max_message", (int32_t)MCU_MAX_MESSAGE);
  fact_int("registry_capacity", (int32_t)ETB_SEAM_MAX_BACKENDS);
  fact_text("capabilities", CAPABILITIES);
  fact_text("load_paths", LOAD_PATHS);
  fact_int("max_models", 1);
  fact_int("rx_buffer", (int32_t)MCU_RX_RING_SIZE);
  fact_int("max_frame", (int32_t)MCU_MAX_FRAME);
  fact_int("window", (int32_t)MCU_RX_WINDOW);
  fact_int("link_frames_bad", (int32_t)stats.frames_bad);
  fact_int("link_duplicates", (int32_t)stats.duplicates);
  fact_int("link_replays", (int32_t)stats.replays);
  fact_int("rx_overruns", (int32_t)stats.rx_overruns);
  fact_int("requests_handled", (int32_t)requests_handled);
  for (k = 0; k < count; k++) {
    const etb_seam_backend_t *backend = etb_seam_get_backend_class(etb_seam_backend_name(k));
    const probe_t *probe = probe_of(backend);
    add_entry(probe != NULL ? probe_name(probe) : etb_seam_backend_name(k), ETB_RT_OK, 0, 0,
              probe != NULL ? ETB_ENTRY_FLAG_PROBE : 0u, NULL, 0);
  }
}

/* ---------------------------------------------------------------- link hooks */

/* Encodes the report; one that does not fit is replaced by a short one that says so. */
static size_t finish_report(uint8_t *out, size_t cap) {
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

static size_t reject(uint32_t seq, etb_status_t error, uint8_t *out, size_t cap) {
  report_start(seq, ETB_ACTION_NONE);
  report_outcome(ETB_OUTCOME_REJECTED, error, "request refused by the agent's decoder: ");
  append_text(etb_status_name(error));
  return finish_report(out, cap);
}

static uint32_t seq_of(const uint8_t *message, size_t len) {
  if (len < ETB_HEADER_SIZE) {
    return 0;
  }
  return (uint32_t)message[12] | ((uint32_t)message[13] << 8) | ((uint32_t)message[14] << 16) |
         ((uint32_t)message[15] << 24);
}

/*
 * One link message is one unit (docs/wire-format.md, "Stream reading", framed links):
 * decoded whole, with this device's max_message as the limit of step 3.
 */
static size_t handle(const uint8_t *message, size_t len, uint8_t *out, size_t cap) {
  etb_header_t header;
  etb_status_t status = etb_peek_header(message, len, MCU_MAX_MESSAGE, ETB_MSG_REQUEST, &header);
  if (status == ETB_OK) {
    status = etb_decode_request(message, len, &request, pool, MCU_OPTION_POOL);
  }
  requests_handled++;
  if (status != ETB_OK) {
    return reject(seq_of(message, len), status, out, cap);
  }
  probes_begin_request();
  report_start(request.seq, request.action);
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
    default:
      report_outcome(ETB_OUTCOME_UNSUPPORTED, 0, "action not served by this agent");
      break;
  }
  return finish_report(out, cap);
}

const link_agent_t mcu_agent = {
    handle,
    reject,
    ACTION_BIT(ETB_ACTION_LOAD) | ACTION_BIT(ETB_ACTION_EXECUTE) | ACTION_BIT(ETB_ACTION_SET) |
        ACTION_BIT(ETB_ACTION_GET) | ACTION_BIT(ETB_ACTION_RESET) |
        ACTION_BIT(ETB_ACTION_REGISTER) | ACTION_BIT(ETB_ACTION_HELLO),
};
