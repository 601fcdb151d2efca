/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_board.h - the parts of the board the agent uses: the board's own
 * addresses come from boards/<board>/board.h (the Makefile's BOARD picks it);
 * the CMSDK UART and the Armv7-M/Armv8-M system control space are the same on
 * every board.
 */
#ifndef MCU_BOARD_H
#define MCU_BOARD_H

#include <stdint.h>

#include "board.h"

typedef struct {
  volatile uint32_t data;      /* +0x00 */
  volatile uint32_t state;     /* +0x04: bit0 TX full, bit1 RX full */
  volatile uint32_t ctrl;      /* +0x08 */
  volatile uint32_t intstatus; /* +0x0C: read status, write 1 to clear */
  volatile uint32_t bauddiv;   /* +0x10 */
} cmsdk_uart_t;

#define UART0 ((cmsdk_uart_t*)UART0_BASE)

#define UART_STATE_TX_FULL 0x1u
#define UART_STATE_RX_FULL 0x2u
#define UART_CTRL_TX_EN 0x1u
#define UART_CTRL_RX_EN 0x2u
#define UART_CTRL_TX_IRQ_EN 0x4u
#define UART_CTRL_RX_IRQ_EN 0x8u
#define UART_INT_TX 0x1u
#define UART_INT_RX 0x2u

/* NVIC and SysTick (system control space). */
#define NVIC_ISER(n) (*(volatile uint32_t*)(0xE000E100u + 4u * (n)))
#define SYST_CSR (*(volatile uint32_t*)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t*)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t*)0xE000E018u)
#define SYST_CSR_ENABLE 0x1u
#define SYST_CSR_CLKSOURCE_CPU 0x4u
#define SYST_MAX_RELOAD 0x00FFFFFFu

/* Application interrupt and reset control: the key, and SYSRESETREQ. */
#define SCB_AIRCR (*(volatile uint32_t*)0xE000ED0Cu)
#define SCB_AIRCR_SYSRESETREQ (0x05FA0000u | 0x4u)

static inline void nvic_enable(uint32_t irq) { NVIC_ISER(irq / 32u) = 1u << (irq % 32u); }

static inline void cpu_irq_disable(void) { __asm__ volatile("cpsid i" ::: "memory"); }
static inline void cpu_irq_enable(void) { __asm__ volatile("cpsie i" ::: "memory"); }

/*
 * Sleep until an interrupt is pending. Called with interrupts masked, so an
 * interrupt that arrives after the caller's last check still wakes the core;
 * its handler runs when the caller unmasks.
 */
static inline void cpu_wait_for_interrupt(void) { __asm__ volatile("wfi" ::: "memory"); }

/* A system reset, as the reset pin gives: the board boots again. */
__attribute__((noreturn)) static inline void cpu_system_reset(void) {
  __asm__ volatile("dsb" ::: "memory");
  SCB_AIRCR = SCB_AIRCR_SYSRESETREQ;
  __asm__ volatile("dsb" ::: "memory");
  for (;;) {
  }
}

#endif /* MCU_BOARD_H */
