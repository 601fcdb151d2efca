// SPDX-License-Identifier: BSD-3-Clause
/*
 * platform.cpp - what the ExecuTorch headers need from the platform, and what
 * C++ needs without libstdc++.
 *
 * executorch::runtime::internal::vlogf (ET_LOG, ET_CHECK) writes one line to the
 * host's standard error through semihosting (on QEMU: its stderr, which the
 * harness keeps); runtime_abort ends the emulator with status 242. Nothing is
 * allocated, so operator delete (named by the vtables of classes with virtual
 * destructors) and a pure virtual call are aborts too, and so is abort() (what
 * libstdc++'s headers call where they would throw, e.g. std::get on the wrong
 * alternative; newlib's abort would need a process to signal).
 *
 * With the runtime compiled from a source tree (MCU_RUNTIME_FROM_SOURCE) the
 * tree's log.cpp and abort.cpp define vlogf and runtime_abort over the platform
 * layer (real/pal.cpp). They format with vsnprintf and snprintf, defined here
 * over the same formatter: newlib's would link its malloc (its string streams
 * may grow). They return the number of characters written, not the number that
 * would have been.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <executorch/runtime/platform/abort.h>
#include <executorch/runtime/platform/log.h>

#include "mcu_exit.h"
#include "mcu_semihost.h"

namespace {

constexpr size_t kLineCap = 200;

/* A line being formatted into text[0..cap); output past its capacity is dropped. */
struct Line {
  char* text;
  size_t cap;
  size_t len = 0;

  void put(char c) {
    if (len < cap) {
      text[len++] = c;
    }
  }
  void put(const char* s) {
    for (; s != nullptr && *s != '\0'; s++) {
      put(*s);
    }
  }
  void put_unsigned(unsigned long long v, unsigned base) {
    char digits[24];
    size_t n = 0;
    do {
      unsigned d = static_cast<unsigned>(v % base);
      digits[n++] = static_cast<char>(d < 10u ? '0' + d : 'a' + d - 10u);
      v /= base;
    } while (v != 0u);
    while (n > 0u) {
      put(digits[--n]);
    }
  }
  void put_signed(long long v) {
    if (v < 0) {
      put('-');
      put_unsigned(0ull - static_cast<unsigned long long>(v), 10u);
    } else {
      put_unsigned(static_cast<unsigned long long>(v), 10u);
    }
  }
};

/* printf's conversions %d %i %u %x %c %s %p %% with h, l, ll and z; width and precision are skipped. */
void format(Line& line, const char* f, va_list args) {
  for (; *f != '\0'; f++) {
    if (*f != '%') {
      line.put(*f);
      continue;
    }
    f++;
    while (*f == '-' || *f == '+' || *f == ' ' || *f == '#' || *f == '0' || *f == '.' || (*f >= '1' && *f <= '9')) {
      f++;
    }
    int longs = 0;
    bool size = false;
    for (; *f == 'l' || *f == 'h' || *f == 'z'; f++) {
      longs += *f == 'l' ? 1 : 0;
      size = size || *f == 'z';
    }
    switch (*f) {
      case 'd':
      case 'i':
        line.put_signed(longs >= 2   ? va_arg(args, long long)
                        : longs == 1 ? va_arg(args, long)
                        : size       ? static_cast<long long>(va_arg(args, ptrdiff_t))
                                     : va_arg(args, int));
        break;
      case 'u':
      case 'x':
        line.put_unsigned(longs >= 2   ? va_arg(args, unsigned long long)
                          : longs == 1 ? va_arg(args, unsigned long)
                          : size       ? va_arg(args, size_t)
                                       : va_arg(args, unsigned),
                          *f == 'x' ? 16u : 10u);
        break;
      case 'p':
        line.put("0x");
        line.put_unsigned(reinterpret_cast<uintptr_t>(va_arg(args, void*)), 16u);
        break;
      case 'c':
        line.put(static_cast<char>(va_arg(args, int)));
        break;
      case 's':
        line.put(va_arg(args, const char*));
        break;
      case '\0':
        return;
      default:
        line.put(*f);
        break;
    }
  }
}

}  // namespace

#ifdef MCU_RUNTIME_FROM_SOURCE
extern "C" int vsnprintf(char* buffer, size_t size, const char* fmt, va_list args) {
  Line line{buffer, size > 0u ? size - 1u : 0u};
  format(line, fmt, args);
  if (size > 0u) {
    buffer[line.len] = '\0';
  }
  return static_cast<int>(line.len);
}

extern "C" int snprintf(char* buffer, size_t size, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  int written = vsnprintf(buffer, size, fmt, args);
  va_end(args);
  return written;
}
#else
namespace executorch {
namespace runtime {
namespace internal {

/* The boards have no wall clock: log lines carry no time. */
et_timestamp_t get_log_timestamp() { return 0; }

void vlogf(LogLevel level, et_timestamp_t timestamp, const char* filename, const char* function, size_t line_number,
           const char* fmt, va_list args) {
  static const char levels[] = "DIEF";
  (void)timestamp;
  (void)function;
  char text[kLineCap];
  Line line{text, kLineCap};
  line.put("executorch ");
  line.put(static_cast<size_t>(level) < sizeof levels - 1u ? levels[static_cast<size_t>(level)] : '?');
  line.put(' ');
  line.put(filename);
  line.put(':');
  line.put_unsigned(line_number, 10u);
  line.put("] ");
  format(line, fmt, args);
  if (line.len == kLineCap) {
    line.len--;
  }
  line.put('\n');
  semihost_write_stderr(line.text, line.len);
}

}  // namespace internal

void runtime_abort() {
  static const char message[] = "executorch runtime_abort()\n";
  semihost_write_stderr(message, sizeof message - 1u);
  semihost_exit(MCU_EXIT_RUNTIME_ABORT);
}

}  // namespace runtime
}  // namespace executorch
#endif /* MCU_RUNTIME_FROM_SOURCE */

void operator delete(void*) noexcept { executorch::runtime::runtime_abort(); }
void operator delete(void*, size_t) noexcept { executorch::runtime::runtime_abort(); }

extern "C" void __cxa_pure_virtual() { executorch::runtime::runtime_abort(); }

extern "C" void abort() { executorch::runtime::runtime_abort(); }
