/* semihost.c - semihosting SYS_EXIT_EXTENDED. */
#include "mcu_semihost.h"

#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

void semihost_exit(uint32_t code) {
  static uint32_t block[2];
  block[0] = ADP_STOPPED_APPLICATION_EXIT;
  block[1] = code;
  for (;;) {
    register uint32_t op __asm__("r0") = SYS_EXIT_EXTENDED;
    register uint32_t arg __asm__("r1") = (uint32_t)block;
    __asm__ volatile("bkpt 0xAB" : "+r"(op) : "r"(arg) : "memory");
  }
}
