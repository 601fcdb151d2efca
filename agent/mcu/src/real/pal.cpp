// SPDX-License-Identifier: BSD-3-Clause
/*
 * pal.cpp - ExecuTorch's platform abstraction layer over the board
 * (runtime/platform/platform.h), for a firmware whose runtime core is compiled
 * from a source tree. The tree's platform.cpp, log.cpp and abort.cpp call these:
 *
 * - et_pal_emit_log_message: one line on the host's standard error through
 *   semihosting (QEMU's stderr, which the harness keeps);
 * - et_pal_abort: ends the emulator with status 242 (MCU_EXIT_RUNTIME_ABORT);
 * - et_pal_current_ticks: SysTick (24 bits, counting down at the CPU clock)
 *   extended to 64 bits at each call, which is exact while calls are less than
 *   2^24 cycles apart (0.5 s at 32 MHz); log timestamps only;
 * - et_pal_allocate: nullptr, always. The firmware allocates nothing after boot:
 *   every MemoryAllocator it hands the runtime sits on a static arena.
 */
#include <stdint.h>

#include <executorch/runtime/platform/platform.h>

#include "mcu_board.h"
#include "mcu_exit.h"
#include "mcu_semihost.h"

namespace {

constexpr size_t kLineCap = 240;

uint64_t ticks_total;
uint32_t ticks_last_reading;

void put(char* line, size_t& len, const char* text, size_t n) {
  for (size_t i = 0; i < n && len < kLineCap - 1u; i++) {
    line[len++] = text[i];
  }
}

size_t text_length(const char* text) {
  size_t n = 0;
  while (text != nullptr && text[n] != '\0') {
    n++;
  }
  return n;
}

}  // namespace

extern "C" {

void et_pal_init(void) { ticks_last_reading = SYST_CVR; }

void et_pal_abort(void) {
  static const char message[] = "executorch et_pal_abort()\n";
  semihost_write_stderr(message, sizeof message - 1u);
  semihost_exit(MCU_EXIT_RUNTIME_ABORT);
}

et_timestamp_t et_pal_current_ticks(void) {
  uint32_t now = SYST_CVR;
  ticks_total += (ticks_last_reading - now) & SYST_MAX_RELOAD; /* SysTick counts down */
  ticks_last_reading = now;
  return ticks_total;
}

et_tick_ratio_t et_pal_ticks_to_ns_multiplier(void) { return et_tick_ratio_t{1000000000ull, MCU_CPU_HZ}; }

void et_pal_emit_log_message(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename,
                             const char* function, size_t line_number, const char* message, size_t length) {
  (void)timestamp;
  (void)function;
  char line[kLineCap];
  size_t len = 0;
  char prefix[] = "executorch ? ";
  prefix[11] = static_cast<char>(level);
  put(line, len, prefix, sizeof prefix - 1u);
  put(line, len, filename, text_length(filename));
  char digits[12];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + line_number % 10u);
    line_number /= 10u;
  } while (line_number != 0u);
  put(line, len, ":", 1u);
  while (n > 0u) {
    put(line, len, &digits[--n], 1u);
  }
  put(line, len, "] ", 2u);
  put(line, len, message, length);
  line[len++] = '\n';
  semihost_write_stderr(line, len);
}

void* et_pal_allocate(size_t size) {
  (void)size;
  return nullptr;
}

void et_pal_free(void* ptr) { (void)ptr; }

}  // extern "C"
