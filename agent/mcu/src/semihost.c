/* SPDX-License-Identifier: BSD-3-Clause */
/* semihost.c - semihosting SYS_EXIT_EXTENDED and writes to the host's stderr. */
#include "mcu_semihost.h"

#define SYS_OPEN 0x01u
#define SYS_WRITE 0x05u
#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u
#define OPEN_MODE_APPEND 8u /* "a": for ":tt", the host's standard error */

static uint32_t semihost_call(uint32_t op, const void* block) {
  register uint32_t r0 __asm__("r0") = op;
  register uint32_t r1 __asm__("r1") = (uint32_t)block;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void semihost_exit(uint32_t code) {
  static uint32_t block[2];
  block[0] = ADP_STOPPED_APPLICATION_EXIT;
  block[1] = code;
  for (;;) {
    (void)semihost_call(SYS_EXIT_EXTENDED, block);
  }
}

void semihost_write_stderr(const char* text, size_t len) {
  static const char console[] = ":tt";
  static uint32_t handle;
  static int opened; /* 0: not yet, 1: open, -1: the host refused */
  uint32_t block[3];
  if (opened == 0) {
    block[0] = (uint32_t)console;
    block[1] = OPEN_MODE_APPEND;
    block[2] = sizeof console - 1u;
    handle = semihost_call(SYS_OPEN, block);
    opened = handle == UINT32_MAX ? -1 : 1;
  }
  if (opened > 0 && len > 0u) {
    block[0] = handle;
    block[1] = (uint32_t)text;
    block[2] = (uint32_t)len;
    (void)semihost_call(SYS_WRITE, block);
  }
}
