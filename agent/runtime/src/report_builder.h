// SPDX-License-Identifier: BSD-3-Clause
// Owns the storage of one report while it is being assembled and encoded.
#pragma once

#include <executorch/runtime/backend/options.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "etb/wire.h"
#include "text_arena.h"

namespace etb {

// etb_report_t only holds views; this class keeps the bytes they point to.
// Capacities follow the wire format's limits; past them, facts, entries and
// options are dropped and the report's message says so.
class ReportBuilder {
 public:
  ReportBuilder();
  ReportBuilder(const ReportBuilder&) = delete;
  ReportBuilder& operator=(const ReportBuilder&) = delete;

  // Starts a fresh report for the given request.
  void start(uint32_t seq, uint8_t action);

  void set_outcome(uint8_t outcome, uint32_t detail, std::string_view message);
  void append_message(std::string_view text);

  void add_fact(std::string_view key, int32_t value);
  void add_fact(std::string_view key, std::string_view value);

  // Starts an entry (of LOAD model `model`); add_option then appends to it.
  void add_entry(std::string_view name, uint32_t status, uint32_t calls, uint32_t executes, uint8_t flags,
                 uint8_t model = 0);
  void add_option(const executorch::runtime::BackendOption& option);

  // Encodes into buf. On a report the encoder refuses (a backend left bytes in
  // an option that are not valid on the wire), encodes a RUNTIME_ERROR report
  // saying so instead.
  etb_status_t encode(uint8_t* buf, size_t cap, size_t* out_len);

  const etb_report_t& report() const { return report_; }

 private:
  etb_str_t keep(std::string_view text);
  etb_option_t* next_option(std::vector<etb_option_t>& pool, size_t limit, std::string_view what);

  etb_report_t report_{};
  TextArena texts_;
  std::vector<etb_option_t> facts_;
  std::vector<etb_option_t> options_;
  std::string message_;
  bool truncated_ = false;
};

}  // namespace etb
