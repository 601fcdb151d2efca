/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_capacity.h - what this firmware can hold, from the RAM its board leaves.
 *
 * The linker gives the option arena all RAM that .data, .bss and the stack
 * leave (boards/sections.ld). At boot capacity_init() divides it into four
 * arrays of equal length, options_per_request each:
 *   - the request's options as executorch::runtime::BackendOption,
 *   - the codec's views of the request (a GET's report reuses them),
 *   - the probes' records of what they received (views),
 *   - the options probes keep from set_option (BackendOption, owner).
 * A LoadBackendOptionsMap holds at most 8 backends (the runtime's limit), so
 * options_per_backend = options_per_request / 8, at most the wire's 64.
 * HELLO announces these figures; a request beyond them is refused (CAPACITY).
 * Nothing is allocated after boot.
 */
#ifndef MCU_CAPACITY_H
#define MCU_CAPACITY_H

#include <stddef.h>

#include "etb/wire.h"
#include "mcu_options.h"

namespace mcu {

/* An option kept by set_option; owner is the probe, nullptr when the slot is free. */
struct KeptOption {
  const void* owner;
  BackendOption option;
};

struct Capacity {
  size_t options_per_backend;
  size_t backends_per_map;
  size_t options_per_request;
  size_t arena_bytes;  /* RAM the linker left for the arena */
  size_t option_bytes; /* RAM one option costs across the four arrays */
};

struct OptionPools {
  BackendOption* request;
  etb_option_t* decoded;
  etb_option_t* received;
  KeptOption* kept;
};

/* Divides the arena; call once at boot, before anything else uses the pools. */
void capacity_init();

const Capacity& capacity();

const OptionPools& pools();

}  // namespace mcu

#endif /* MCU_CAPACITY_H */
