/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c - the MCU agent: serve the serial link, sleep (wfi) whenever idle. */
#include "mcu_agent.h"
#include "mcu_board.h"
#include "mcu_clock.h"
#include "mcu_link.h"
#include "mcu_uart.h"

#define BAUD_RATE 115200u

int main(void) {
  clock_init();
  agent_init();
  uart_init(BAUD_RATE);
  link_init(&mcu_agent);
  for (;;) {
    link_poll();
    if (agent_reboot_due() && link_report_acknowledged()) {
      cpu_system_reset(); /* REBOOT: the board starts again and sends its boot HELLO */
    }
    cpu_irq_disable();
    if (!link_has_work()) {
      cpu_wait_for_interrupt();
    }
    cpu_irq_enable();
  }
}
