/*
 * mcu_semihost.h - Arm semihosting calls the agent makes (QEMU runs it with
 * -semihosting-config enable=on,target=native).
 */
#ifndef MCU_SEMIHOST_H
#define MCU_SEMIHOST_H

#include <stdint.h>

/* SYS_EXIT_EXTENDED: ends the emulator with exit status `code`. Never returns. */
void semihost_exit(uint32_t code) __attribute__((noreturn));

#endif /* MCU_SEMIHOST_H */
