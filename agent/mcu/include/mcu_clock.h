/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_clock.h - microsecond durations from SysTick, free running without its
 * interrupt (so an idle device stays asleep). Durations up to 0.67 s are exact;
 * longer ones wrap.
 */
#ifndef MCU_CLOCK_H
#define MCU_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void clock_init(void);

/* A reading of the free-running counter. */
uint32_t clock_now(void);

/* Microseconds from `start` (an earlier clock_now()) to now. */
uint32_t clock_elapsed_us(uint32_t start);

#ifdef __cplusplus
}
#endif

#endif /* MCU_CLOCK_H */
