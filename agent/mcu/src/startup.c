/* startup.c - vector table and reset handler for the Cortex-M3 of mps2-an385. */
#include <stdint.h>
#include <string.h>

#include "mcu_exit.h"
#include "mcu_semihost.h"

#define EXTERNAL_IRQS 32u

typedef void (*vector_t)(void);

/* Defined by mps2_an385.ld. */
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
  memcpy(&__data_start, &__data_load, (size_t)((uint8_t *)&__data_end - (uint8_t *)&__data_start));
  memset(&__bss_start, 0, (size_t)((uint8_t *)&__bss_end - (uint8_t *)&__bss_start));
  main();
  semihost_exit(MCU_EXIT_MAIN_RETURNED);
}

/* Faults and stray interrupts end the emulator, so a crash shows as an exit status, not a hang. */
void unexpected_exception(void) { semihost_exit(MCU_EXIT_FAULT); }

__attribute__((section(".vectors"), used)) static const vector_t vectors[16u + EXTERNAL_IRQS] = {
    [0] = (vector_t)(uintptr_t)&__stack_top,
    [1] = reset_handler,
    [2 ... 15] = unexpected_exception,
    [16 + 0] = uart0_rx_irq_handler,
    [16 + 1] = uart0_tx_irq_handler,
    [16 + 2 ... 16u + EXTERNAL_IRQS - 1u] = unexpected_exception,
};
