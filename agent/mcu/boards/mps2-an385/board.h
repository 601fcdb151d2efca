/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * board.h - Arm MPS2 AN385 (Cortex-M3), as QEMU's mps2-an385 machine emulates it.
 */
#ifndef MCU_BOARD_PARTS_H
#define MCU_BOARD_PARTS_H

#define MCU_BOARD_NAME "mps2-an385"
#define MCU_ABI "armv7m"
#define MCU_CPU_HZ 25000000u

/* CMSDK APB UART0 and its NVIC lines. */
#define UART0_BASE 0x40004000u
#define UART0_RX_IRQ 0u
#define UART0_TX_IRQ 1u

#define MCU_EXTERNAL_IRQS 32u

/* Program store and method memory (mcu_program.h); what RAM is left holds options. */
#define MCU_PROGRAM_SLOTS 4u
#define MCU_PROGRAM_BYTES 3072u
#define MCU_METHOD_ARENA_BYTES 4608u

#endif /* MCU_BOARD_PARTS_H */
