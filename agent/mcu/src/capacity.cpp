// SPDX-License-Identifier: BSD-3-Clause
/* capacity.cpp - the option arena divided at boot (see mcu_capacity.h). */
#include "mcu_capacity.h"

#include <stdint.h>

#include <new>

#include <executorch/runtime/platform/assert.h>
#include <executorch/runtime/platform/log.h>

#include "mcu_board.h"

extern "C" {
extern uint8_t __arena_start[]; /* boards/sections.ld */
extern uint8_t __arena_end[];
}

namespace mcu {

namespace {

Capacity figures;
OptionPools arrays;

constexpr size_t kOptionBytes = sizeof(BackendOption) + 2u * sizeof(etb_option_t) + sizeof(KeptOption);

uint8_t* align_up(uint8_t* p, size_t alignment) {
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<uint8_t*>((address + alignment - 1u) & ~(uintptr_t)(alignment - 1u));
}

/* Constructs `count` objects of T at the next suitably aligned place of *cursor. */
template <typename T>
T* carve(uint8_t** cursor, size_t count) {
  T* first = reinterpret_cast<T*>(align_up(*cursor, alignof(T)));
  for (size_t k = 0; k < count; k++) {
    new (&first[k]) T{};
  }
  *cursor = reinterpret_cast<uint8_t*>(first + count);
  return first;
}

}  // namespace

void capacity_init() {
  size_t bytes = static_cast<size_t>(__arena_end - __arena_start);
  /* Alignment padding between the four arrays costs at most 3 x 8 bytes. */
  size_t usable = bytes > 32u ? bytes - 32u : 0u;
  size_t per_backend = usable / (ETB_MAX_LOAD_BACKENDS * kOptionBytes);
  if (per_backend > ETB_MAX_OPTIONS) {
    per_backend = ETB_MAX_OPTIONS;
  }
  ET_CHECK_MSG(per_backend > 0u, "the option arena (%u bytes) holds no 8 x 1 options", static_cast<unsigned>(bytes));
  figures.options_per_backend = per_backend;
  figures.backends_per_map = ETB_MAX_LOAD_BACKENDS;
  figures.options_per_request = ETB_MAX_LOAD_BACKENDS * per_backend;
  figures.arena_bytes = bytes;
  figures.option_bytes = kOptionBytes;
  uint8_t* cursor = __arena_start;
  size_t n = figures.options_per_request;
  arrays.request = carve<BackendOption>(&cursor, n);
  arrays.decoded = carve<etb_option_t>(&cursor, n);
  arrays.received = carve<etb_option_t>(&cursor, n);
  arrays.kept = carve<KeptOption>(&cursor, n);
  ET_CHECK_MSG(cursor <= __arena_end, "option arrays overrun the arena");
  ET_LOG(Info,
         "etb-mcu on %s: %u options per backend x %u backends (BackendOption %u bytes, "
         "arena %u bytes)",
         MCU_BOARD_NAME, static_cast<unsigned>(per_backend), static_cast<unsigned>(figures.backends_per_map),
         static_cast<unsigned>(sizeof(BackendOption)), static_cast<unsigned>(bytes));
}

const Capacity& capacity() { return figures; }

const OptionPools& pools() { return arrays; }

}  // namespace mcu
