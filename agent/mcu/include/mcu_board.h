/*
 * mcu_board.h - the parts of the Arm MPS2 AN385 board (Cortex-M3) the agent uses,
 * as QEMU's mps2-an385 machine emulates them.
 */
#ifndef MCU_BOARD_H
#define MCU_BOARD_H

#include <stdint.h>

#define MCU_CPU_HZ 25000000u

/* CMSDK APB UART0. */
#define UART0_BASE 0x40004000u
#define UART0_RX_IRQ 0u
#define UART0_TX_IRQ 1u

typedef struct {
  volatile uint32_t data;      /* +0x00 */
  volatile uint32_t state;     /* +0x04: bit0 TX full, bit1 RX full */
  volatile uint32_t ctrl;      /* +0x08 */
  volatile uint32_t intstatus; /* +0x0C: read status, write 1 to clear */
  volatile uint32_t bauddiv;   /* +0x10 */
} cmsdk_uart_t;

#define UART0 ((cmsdk_uart_t *)UART0_BASE)

#define UART_STATE_TX_FULL 0x1u
#define UART_STATE_RX_FULL 0x2u
#define UART_CTRL_TX_EN 0x1u
#define UART_CTRL_RX_EN 0x2u
#define UART_CTRL_TX_IRQ_EN 0x4u
#define UART_CTRL_RX_IRQ_EN 0x8u
#define UART_INT_TX 0x1u
#define UART_INT_RX 0x2u

/* NVIC and SysTick (ARMv7-M system control space). */
#define NVIC_ISER0 (*(volatile uint32_t *)0xE000E100u)
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define SYST_CSR_ENABLE 0x1u
#define SYST_CSR_CLKSOURCE_CPU 0x4u
#define SYST_MAX_RELOAD 0x00FFFFFFu

static inline void cpu_irq_disable(void) { __asm__ volatile("cpsid i" ::: "memory"); }
static inline void cpu_irq_enable(void) { __asm__ volatile("cpsie i" ::: "memory"); }

/*
 * Sleep until an interrupt is pending. Called with interrupts masked, so an
 * interrupt that arrives after the caller's last check still wakes the core;
 * its handler runs when the caller unmasks.
 */
static inline void cpu_wait_for_interrupt(void) { __asm__ volatile("wfi" ::: "memory"); }

#endif /* MCU_BOARD_H */
