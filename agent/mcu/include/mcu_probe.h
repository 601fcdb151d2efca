/*
 * mcu_probe.h - probe backends: backends that record what the runtime hands
 * them, so a report can show exactly what each backend received.
 *
 * A probe is registered under a name chosen at run time (REGISTER) and keeps
 * its own copy of that name, which it reports. Per request it records how often
 * each hook ran, the order of its first call among all probes, and the options
 * it received: the runtime_specs of its first init, or what set_option got.
 * Across requests it keeps the options set on it (get_option reads them back),
 * until probes_reset().
 */
#ifndef MCU_PROBE_H
#define MCU_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etb_backend_seam.h"

typedef struct {
  uint16_t init_calls;
  uint16_t execute_calls;
  uint16_t set_calls;
  uint16_t get_calls;
  uint32_t first_call; /* order of the first hook call in this request; 0: not called */
  const etb_option_t *received;
  uint8_t received_count;
  bool specs_diverged; /* a later init got runtime_specs different from the first */
} probe_record_t;

typedef struct {
  bool in_use;
  uint8_t name_len;
  uint8_t name[ETB_MAX_ID];
  probe_record_t record;
} probe_t;

/* A new probe named `name` (copied), or NULL if none is free. */
probe_t *probe_create(etb_str_t name);

/* Returns an unregistered probe to the pool. */
void probe_release(probe_t *probe);

/* The backend object for registering `probe` with the seam. */
etb_seam_backend_t probe_backend(probe_t *probe);

/* The probe behind a registered backend, or NULL if it is not a probe. */
probe_t *probe_of(const etb_seam_backend_t *backend);

/* The name the probe answers to (its own copy). */
etb_str_t probe_name(const probe_t *probe);

/* Forgets every probe's record of the previous request. */
void probes_begin_request(void);

/* Forgets records and every option set on any probe (RESET). */
void probes_reset(void);

/* The probes called in this request, in the order of their first call; returns the count. */
size_t probes_called(const probe_t **out, size_t cap);

#endif /* MCU_PROBE_H */
