/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_exit.h - exit statuses the firmware ends the emulator with (semihosting),
 * besides the status an EXIT frame asks for.
 */
#ifndef MCU_EXIT_H
#define MCU_EXIT_H

#define MCU_EXIT_FAULT 240u /* a CPU fault or an unexpected exception */
#define MCU_EXIT_MAIN_RETURNED 241u
#define MCU_EXIT_RUNTIME_ABORT 242u /* executorch::runtime::runtime_abort() */

#endif /* MCU_EXIT_H */
