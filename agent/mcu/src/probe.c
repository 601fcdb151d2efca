/* probe.c - probe backends (see mcu_probe.h). */
#include "mcu_probe.h"

#include <string.h>

#include "mcu_config.h"

/* One spare beyond the registry's capacity: a registration the full registry
 * refuses is still attempted, so the registry gives its own answer. */
#define PROBE_POOL (ETB_SEAM_MAX_BACKENDS + 1u)

/* An option kept by set_option, owned by one probe. */
typedef struct {
  const probe_t *owner; /* NULL: free */
  uint8_t type;
  bool b;
  int32_t i;
  uint8_t key_len;
  uint8_t s_len;
  uint8_t key[ETB_MAX_KEY];
  uint8_t s[ETB_MAX_STRING];
} setting_t;

static probe_t probes[PROBE_POOL];
static setting_t settings[MCU_SETTING_SLOTS];
/* What probes received during this request, each probe's options contiguous. */
static etb_option_t records[MCU_OPTION_POOL];
static size_t records_used;
static uint32_t call_clock;

static bool str_equal(etb_str_t a, const uint8_t *b, size_t b_len) {
  return a.len == b_len && (b_len == 0u || memcmp(a.ptr, b, b_len) == 0);
}

static bool options_equal(const etb_option_t *a, const etb_option_t *b, size_t count) {
  size_t k;
  for (k = 0; k < count; k++) {
    if (!str_equal(a[k].key, b[k].key.ptr, b[k].key.len) || a[k].type != b[k].type) {
      return false;
    }
    if ((a[k].type == ETB_TYPE_BOOL && a[k].b != b[k].b) ||
        (a[k].type == ETB_TYPE_INT && a[k].i != b[k].i) ||
        (a[k].type == ETB_TYPE_STRING && !str_equal(a[k].s, b[k].s.ptr, b[k].s.len))) {
      return false;
    }
  }
  return true;
}

static void note_call(probe_t *probe) {
  if (probe->record.first_call == 0u) {
    probe->record.first_call = ++call_clock;
  }
}

/* Appends options to the probe's record (at most ETB_MAX_OPTIONS kept); false if out of room. */
static bool record(probe_t *probe, const etb_option_t *options, size_t count) {
  probe_record_t *rec = &probe->record;
  size_t room = ETB_MAX_OPTIONS - rec->received_count;
  size_t keep = count < room ? count : room;
  if (rec->received_count > 0u && rec->received + rec->received_count != &records[records_used]) {
    /* Not at the end of the pool: move this probe's options there first. */
    if (records_used + rec->received_count > MCU_OPTION_POOL) {
      return false;
    }
    memmove(&records[records_used], rec->received, rec->received_count * sizeof records[0]);
    rec->received = &records[records_used];
    records_used += rec->received_count;
  }
  if (records_used + keep > MCU_OPTION_POOL) {
    return false;
  }
  if (rec->received_count == 0u) {
    rec->received = &records[records_used];
  }
  memcpy(&records[records_used], options, keep * sizeof records[0]);
  records_used += keep;
  rec->received_count = (uint8_t)(rec->received_count + keep);
  return true;
}

static setting_t *find_setting(const probe_t *probe, etb_str_t key) {
  size_t k;
  for (k = 0; k < MCU_SETTING_SLOTS; k++) {
    if (settings[k].owner == probe && str_equal(key, settings[k].key, settings[k].key_len)) {
      return &settings[k];
    }
  }
  return NULL;
}

static bool keep_setting(const probe_t *probe, const etb_option_t *option) {
  setting_t *slot = find_setting(probe, option->key);
  size_t k;
  for (k = 0; slot == NULL && k < MCU_SETTING_SLOTS; k++) {
    if (settings[k].owner == NULL) {
      slot = &settings[k];
      slot->owner = probe;
      slot->key_len = (uint8_t)option->key.len;
      memcpy(slot->key, option->key.ptr, option->key.len);
    }
  }
  if (slot == NULL) {
    return false;
  }
  slot->type = option->type;
  slot->b = option->b;
  slot->i = option->i;
  slot->s_len = option->type == ETB_TYPE_STRING ? (uint8_t)option->s.len : 0u;
  if (slot->s_len > 0u) {
    memcpy(slot->s, option->s.ptr, slot->s_len);
  }
  return true;
}

static void forget_settings(const probe_t *probe) {
  size_t k;
  for (k = 0; k < MCU_SETTING_SLOTS; k++) {
    if (settings[k].owner == probe) {
      settings[k].owner = NULL;
    }
  }
}

static bool probe_is_available(void *self) {
  (void)self;
  return true;
}

static etb_rt_error_t probe_init(void *self, const etb_option_t *runtime_specs, size_t count) {
  probe_t *probe = self;
  probe_record_t *rec = &probe->record;
  note_call(probe);
  if (rec->init_calls == 0u) {
    if (!record(probe, runtime_specs, count)) {
      return ETB_RT_MEMORY_ALLOCATION_FAILED;
    }
  } else if (count != rec->received_count || !options_equal(runtime_specs, rec->received, count)) {
    rec->specs_diverged = true;
  }
  rec->init_calls++;
  return ETB_RT_OK;
}

static etb_rt_error_t probe_execute(void *self) {
  probe_t *probe = self;
  note_call(probe);
  probe->record.execute_calls++;
  return ETB_RT_OK;
}

static etb_rt_error_t probe_set_option(void *self, const etb_option_t *options, size_t count) {
  probe_t *probe = self;
  size_t k;
  note_call(probe);
  probe->record.set_calls++;
  if (!record(probe, options, count)) {
    return ETB_RT_MEMORY_ALLOCATION_FAILED;
  }
  for (k = 0; k < count; k++) {
    if (!keep_setting(probe, &options[k])) {
      return ETB_RT_MEMORY_ALLOCATION_FAILED;
    }
  }
  return ETB_RT_OK;
}

/* Like real backends: fills the keys this probe holds, leaves the others as they are. */
static etb_rt_error_t probe_get_option(void *self, etb_option_t *options, size_t count) {
  probe_t *probe = self;
  size_t k;
  note_call(probe);
  probe->record.get_calls++;
  for (k = 0; k < count; k++) {
    const setting_t *held = find_setting(probe, options[k].key);
    if (held != NULL) {
      options[k].type = held->type;
      options[k].b = held->b;
      options[k].i = held->i;
      options[k].s.ptr = held->s;
      options[k].s.len = held->s_len;
    }
  }
  return ETB_RT_OK;
}

/* Delegate handles are the probe itself, so there is nothing to free. */
static void probe_destroy(void *self) { (void)self; }

static const etb_backend_interface_t probe_interface = {
    probe_is_available, probe_init,       probe_execute,
    probe_set_option,   probe_get_option, probe_destroy,
};

probe_t *probe_create(etb_str_t name) {
  size_t k;
  for (k = 0; k < PROBE_POOL; k++) {
    if (!probes[k].in_use) {
      probe_t *probe = &probes[k];
      memset(probe, 0, sizeof *probe);
      probe->in_use = true;
      probe->name_len = (uint8_t)name.len;
      memcpy(probe->name, name.ptr, name.len);
      return probe;
    }
  }
  return NULL;
}

void probe_release(probe_t *probe) {
  forget_settings(probe);
  probe->in_use = false;
}

etb_seam_backend_t probe_backend(probe_t *probe) {
  etb_seam_backend_t backend;
  backend.name = probe_name(probe);
  backend.interface = &probe_interface;
  backend.self = probe;
  return backend;
}

probe_t *probe_of(const etb_seam_backend_t *backend) {
  return backend != NULL && backend->interface == &probe_interface ? backend->self : NULL;
}

etb_str_t probe_name(const probe_t *probe) {
  etb_str_t name;
  name.ptr = probe->name;
  name.len = probe->name_len;
  return name;
}

void probes_begin_request(void) {
  size_t k;
  for (k = 0; k < PROBE_POOL; k++) {
    memset(&probes[k].record, 0, sizeof probes[k].record);
  }
  records_used = 0;
  call_clock = 0;
}

void probes_reset(void) {
  size_t k;
  probes_begin_request();
  for (k = 0; k < MCU_SETTING_SLOTS; k++) {
    settings[k].owner = NULL;
  }
}

size_t probes_called(const probe_t **out, size_t cap) {
  size_t n = 0;
  uint32_t order;
  size_t k;
  /* first_call values are 1..call_clock, each used by at most one probe. */
  for (order = 1; order <= call_clock && n < cap; order++) {
    for (k = 0; k < PROBE_POOL; k++) {
      if (probes[k].in_use && probes[k].record.first_call == order) {
        out[n++] = &probes[k];
        break;
      }
    }
  }
  return n;
}
