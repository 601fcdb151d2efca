// SPDX-License-Identifier: BSD-3-Clause
// How long a runtime call took, for the report's timings.
#pragma once

#include <chrono>
#include <cstdint>

namespace etb {

using Clock = std::chrono::steady_clock;

// Microseconds from start until now.
inline int64_t micros_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

}  // namespace etb
