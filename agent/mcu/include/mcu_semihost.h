/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_semihost.h - Arm semihosting calls the agent makes (QEMU runs it with
 * -semihosting-config enable=on,target=native; on a board, the debugger serves them).
 */
#ifndef MCU_SEMIHOST_H
#define MCU_SEMIHOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SYS_EXIT_EXTENDED: ends the emulator with exit status `code`. Never returns. */
void semihost_exit(uint32_t code) __attribute__((noreturn));

/* Writes len bytes to the host's standard error (":tt" opened for append; QEMU's stderr). */
void semihost_write_stderr(const char* text, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* MCU_SEMIHOST_H */
