/* SPDX-License-Identifier: BSD-3-Clause */
/* uart.c - CMSDK APB UART0: RX interrupt into a ring buffer, TX waits with wfi. */
#include "mcu_uart.h"

#include "mcu_board.h"
#include "mcu_config.h"

#define RING_MASK (MCU_RX_RING_SIZE - 1u)

/* Single producer (the RX interrupt) and single consumer (the main loop). */
static uint8_t rx_ring[MCU_RX_RING_SIZE];
static volatile uint32_t rx_head; /* written by the interrupt */
static volatile uint32_t rx_tail; /* written by the main loop */
static volatile uint32_t rx_overruns;

void uart_init(uint32_t baud) {
  UART0->ctrl = 0;
  UART0->bauddiv = MCU_CPU_HZ / baud;
  UART0->intstatus = UART_INT_TX | UART_INT_RX;
  UART0->ctrl = UART_CTRL_TX_EN | UART_CTRL_RX_EN | UART_CTRL_RX_IRQ_EN | UART_CTRL_TX_IRQ_EN;
  /*
   * Reading DATA drops a stale byte on hardware. On QEMU it also tells the
   * emulator that the UART takes input now: without it QEMU may not look at the
   * socket again until an unrelated timer, delaying the first request ~0.7 s.
   */
  (void)UART0->data;
  nvic_enable(UART0_RX_IRQ);
  nvic_enable(UART0_TX_IRQ);
}

void uart0_rx_irq_handler(void);
void uart0_rx_irq_handler(void) {
  /* Clear first, then drain: a byte arriving after the last check raises the interrupt again. */
  UART0->intstatus = UART_INT_RX;
  while (UART0->state & UART_STATE_RX_FULL) {
    uint8_t byte = (uint8_t)UART0->data;
    uint32_t head = rx_head;
    if (head - rx_tail >= MCU_RX_RING_SIZE) {
      rx_overruns++;
    } else {
      rx_ring[head & RING_MASK] = byte;
      rx_head = head + 1u;
    }
  }
}

/* Only wakes the core from wfi in uart_write. */
void uart0_tx_irq_handler(void);
void uart0_tx_irq_handler(void) { UART0->intstatus = UART_INT_TX; }

size_t uart_read(uint8_t* out, size_t cap) {
  uint32_t tail = rx_tail;
  uint32_t head = rx_head;
  size_t n = 0;
  while (tail != head && n < cap) {
    out[n++] = rx_ring[tail & RING_MASK];
    tail++;
  }
  rx_tail = tail;
  return n;
}

bool uart_rx_pending(void) { return rx_head != rx_tail; }

void uart_write(const uint8_t* data, size_t len) {
  size_t i;
  for (i = 0; i < len; i++) {
    cpu_irq_disable();
    while (UART0->state & UART_STATE_TX_FULL) {
      cpu_wait_for_interrupt();
      cpu_irq_enable();
      cpu_irq_disable();
    }
    UART0->data = data[i];
    cpu_irq_enable();
  }
}

uint32_t uart_rx_overruns(void) { return rx_overruns; }
