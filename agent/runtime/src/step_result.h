// SPDX-License-Identifier: BSD-3-Clause
// What a failed step of serving a request returns.
#pragma once

#include <executorch/runtime/core/error.h>

#include <string>

namespace etb {

// The runtime's Error and a sentence for the report.
struct StepResult {
  executorch::runtime::Error error = executorch::runtime::Error::Ok;
  std::string message;

  bool ok() const { return error == executorch::runtime::Error::Ok; }
};

}  // namespace etb
