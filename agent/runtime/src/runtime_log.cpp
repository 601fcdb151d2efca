// SPDX-License-Identifier: BSD-3-Clause
#include "runtime_log.h"

#include <executorch/runtime/platform/platform.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

namespace etb {

namespace {

// What Method::init logs for an operator without a kernel: "Missing operator: [N] NAME".
constexpr std::string_view kMissing = "Missing operator: [";
// The report's message is at most 1024 bytes; the names take at most this many.
constexpr size_t kMaxNamesBytes = 600;

thread_local MissingOperators* current_collector = nullptr;
// The PAL's log function before the agent's: written once, before any other thread starts.
pal_emit_log_message_method printed_by = nullptr;

void emit(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename, const char* function, size_t line,
          const char* message, size_t length) {
  if (printed_by != nullptr) {
    printed_by(timestamp, level, filename, function, line, message, length);
  }
  const std::string_view text(message, length);
  if (current_collector == nullptr || text.substr(0, kMissing.size()) != kMissing) {
    return;
  }
  const size_t close = text.find("] ", kMissing.size());
  if (close != std::string_view::npos) {
    std::string_view name = text.substr(close + 2);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) {
      name.remove_suffix(1);
    }
    current_collector->add(std::string(name));
  }
}

}  // namespace

void install_runtime_log() {
  if (printed_by == nullptr) {
    printed_by = executorch::runtime::get_pal_impl()->emit_log_message;
    executorch::runtime::register_pal(executorch::runtime::PalImpl::create(emit, __FILE__));
  }
}

MissingOperators::MissingOperators() : outer_(current_collector) { current_collector = this; }

MissingOperators::~MissingOperators() { current_collector = outer_; }

void MissingOperators::add(std::string name) {
  if (!name.empty() && std::find(names_.begin(), names_.end(), name) == names_.end()) {
    names_.push_back(std::move(name));
  }
}

StepResult MissingOperators::named_in(StepResult step) const {
  if (step.ok() || names_.empty()) {
    return step;
  }
  std::string names;
  size_t shown = 0;
  for (const std::string& name : names_) {
    if (names.size() + name.size() > kMaxNamesBytes) {
      break;
    }
    names += (shown++ ? ", " : "") + name;
  }
  if (shown < names_.size()) {
    names += " and " + std::to_string(names_.size() - shown) + " more";
  }
  step.message += std::string("; missing operator") + (names_.size() == 1 ? ": " : "s: ") + names;
  return step;
}

}  // namespace etb
