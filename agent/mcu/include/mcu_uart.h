/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_uart.h - UART0 driver: interrupt-driven receive into a ring buffer,
 * transmit that sleeps (wfi) while the transmitter is busy.
 */
#ifndef MCU_UART_H
#define MCU_UART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void uart_init(uint32_t baud);

/* Moves up to cap received bytes out of the ring; returns how many. */
size_t uart_read(uint8_t* out, size_t cap);

/* True when received bytes wait in the ring. Call with interrupts masked to sleep safely. */
bool uart_rx_pending(void);

/* Sends len bytes; sleeps while the transmitter is full. */
void uart_write(const uint8_t* data, size_t len);

/* Bytes dropped because the ring was full (flow control failed). */
uint32_t uart_rx_overruns(void);

#ifdef __cplusplus
}
#endif

#endif /* MCU_UART_H */
