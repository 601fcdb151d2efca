/* SPDX-License-Identifier: BSD-3-Clause */
/* startup.c - vector table and reset handler (every board; its IRQ lines from board.h). */
#include <stdint.h>
#include <string.h>

#include "mcu_board.h"
#include "mcu_exit.h"
#include "mcu_semihost.h"

typedef void (*vector_t)(void);

/* Defined by boards/sections.ld. */
extern uint32_t __stack_top;
extern uint32_t __data_load;
extern uint32_t __data_start;
extern uint32_t __data_end;
extern uint32_t __bss_start;
extern uint32_t __bss_end;

int main(void);
void reset_handler(void);
void unexpected_exception(void);
void uart0_rx_irq_handler(void);
void uart0_tx_irq_handler(void);

void reset_handler(void) {
  memcpy(&__data_start, &__data_load, (size_t)((uint8_t*)&__data_end - (uint8_t*)&__data_start));
  memset(&__bss_start, 0, (size_t)((uint8_t*)&__bss_end - (uint8_t*)&__bss_start));
  main();
  semihost_exit(MCU_EXIT_MAIN_RETURNED);
}

/* Faults and stray interrupts end the emulator, so a crash shows as an exit status, not a hang. */
void unexpected_exception(void) { semihost_exit(MCU_EXIT_FAULT); }

/* Every slot is unexpected_exception except those named after it. */
#pragma GCC diagnostic ignored "-Woverride-init"
__attribute__((section(".vectors"), used)) static const vector_t vectors[16u + MCU_EXTERNAL_IRQS] = {
    [0] = (vector_t)(uintptr_t)&__stack_top,
    [1] = reset_handler,
    [2 ... 16u + MCU_EXTERNAL_IRQS - 1u] = unexpected_exception,
    [16u + UART0_RX_IRQ] = uart0_rx_irq_handler,
    [16u + UART0_TX_IRQ] = uart0_tx_irq_handler,
};
