/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * board.h - Arm MPS3 AN547 (Corstone-300: Cortex-M55), as QEMU's mps3-an547
 * machine emulates it. The core starts in the Secure state, so the firmware
 * uses the Secure aliases: ITCM at 0x10000000 (the vector table at 0x0 is the
 * same memory), DTCM at 0x30000000, UART0 at 0x59303000 (0x49303000 Non-secure).
 * UART0 receive is NVIC line 33, transmit 34 (measured on QEMU 7.2: a received
 * byte entered exception 49).
 */
#ifndef MCU_BOARD_PARTS_H
#define MCU_BOARD_PARTS_H

#define MCU_BOARD_NAME "mps3-an547"
#define MCU_ABI "armv8.1m"
#define MCU_CPU_HZ 32000000u

/* CMSDK APB UART0 (Secure alias) and its NVIC lines. */
#define UART0_BASE 0x59303000u
#define UART0_RX_IRQ 33u
#define UART0_TX_IRQ 34u

#define MCU_EXTERNAL_IRQS 96u

/* Program store and method memory (mcu_program.h); what RAM is left holds options. */
#define MCU_PROGRAM_SLOTS 8u
#define MCU_PROGRAM_BYTES 4096u
#define MCU_METHOD_ARENA_BYTES 8192u

#endif /* MCU_BOARD_PARTS_H */
