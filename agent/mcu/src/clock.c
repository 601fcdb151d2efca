/* SPDX-License-Identifier: BSD-3-Clause */
/* clock.c - SysTick as a free-running 24-bit down counter at the CPU clock. */
#include "mcu_clock.h"

#include "mcu_board.h"

void clock_init(void) {
  SYST_RVR = SYST_MAX_RELOAD;
  SYST_CVR = 0;
  SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_CLKSOURCE_CPU;
}

uint32_t clock_now(void) { return SYST_CVR; }

uint32_t clock_elapsed_us(uint32_t start) {
  uint32_t ticks = (start - SYST_CVR) & SYST_MAX_RELOAD;
  return ticks / (MCU_CPU_HZ / 1000000u);
}
