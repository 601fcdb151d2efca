// SPDX-License-Identifier: BSD-3-Clause
#include "report_builder.h"

#include <algorithm>
#include <string>
#include <variant>

#include "runtime_options.h"

namespace etb {

namespace {

constexpr size_t kOptionPool = ETB_MAX_BACKENDS * ETB_MAX_OPTIONS;
// Holds every text of a typical report in one block.
constexpr size_t kTextBlock = 16 * 1024;

// The longest prefix of text of at most max bytes that ends on a UTF-8
// character boundary.
std::string_view utf8_prefix(std::string_view text, size_t max) {
  if (text.size() <= max) {
    return text;
  }
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return text.substr(0, end);
}

// text with every byte that does not begin a well-formed UTF-8 character
// replaced by '?': messages quote what a program holds (a damaged program's
// delegate id, say), and the wire carries UTF-8 only.
std::string well_formed_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    size_t length = lead < 0x80                      ? 1
                    : (lead >= 0xC2 && lead <= 0xDF) ? 2
                    : (lead >= 0xE0 && lead <= 0xEF) ? 3
                    : (lead >= 0xF0 && lead <= 0xF4) ? 4
                                                     : 0;
    bool ok = length > 0 && i + length <= text.size();
    for (size_t k = 1; ok && k < length; ++k) {
      ok = (byte(i + k) & 0xC0) == 0x80;
    }
    if (ok && length >= 3) {
      const unsigned char second = byte(i + 1);
      ok = !(lead == 0xE0 && second < 0xA0) && !(lead == 0xED && second > 0x9F) &&  // overlong, surrogate
           !(lead == 0xF0 && second < 0x90) && !(lead == 0xF4 && second > 0x8F);    // overlong, > U+10FFFF
    }
    if (!ok) {
      out += '?';
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

}  // namespace

ReportBuilder::ReportBuilder() : texts_(kTextBlock) {
  facts_.reserve(ETB_MAX_FACTS);
  options_.reserve(kOptionPool);
}

void ReportBuilder::start(uint32_t seq, uint8_t action) {
  report_ = etb_report_t{};
  report_.seq = seq;
  report_.action = action;
  report_.outcome = ETB_OUTCOME_OK;
  texts_.clear();
  facts_.clear();
  options_.clear();
  message_.clear();
  truncated_ = false;
}

void ReportBuilder::set_outcome(uint8_t outcome, uint32_t detail, std::string_view message) {
  report_.outcome = outcome;
  report_.detail = detail;
  message_.assign(message);
}

void ReportBuilder::append_message(std::string_view text) {
  if (!message_.empty()) {
    message_ += "; ";
  }
  message_ += text;
}

etb_str_t ReportBuilder::keep(std::string_view text) {
  const std::string_view kept = texts_.keep(text.substr(0, UINT16_MAX));
  return etb_str_t{reinterpret_cast<const uint8_t*>(kept.data()), static_cast<uint16_t>(kept.size())};
}

etb_option_t* ReportBuilder::next_option(std::vector<etb_option_t>& pool, size_t limit, std::string_view what) {
  if (pool.size() >= limit || pool.size() >= pool.capacity()) {
    if (!truncated_) {
      truncated_ = true;
      append_message(std::string("report truncated: too many ") + std::string(what));
    }
    return nullptr;
  }
  pool.emplace_back();
  return &pool.back();
}

void ReportBuilder::add_fact(std::string_view key, int32_t value) {
  etb_option_t* fact = next_option(facts_, ETB_MAX_FACTS, "facts");
  if (fact == nullptr) {
    return;
  }
  fact->key = keep(key);
  fact->type = ETB_TYPE_INT;
  fact->i = value;
  report_.facts = facts_.data();
  report_.fact_count = static_cast<uint8_t>(facts_.size());
}

void ReportBuilder::add_fact(std::string_view key, std::string_view value) {
  etb_option_t* fact = next_option(facts_, ETB_MAX_FACTS, "facts");
  if (fact == nullptr) {
    return;
  }
  fact->key = keep(key);
  fact->type = ETB_TYPE_STRING;
  fact->s = keep(value);
  report_.facts = facts_.data();
  report_.fact_count = static_cast<uint8_t>(facts_.size());
}

void ReportBuilder::add_entry(std::string_view name, uint32_t status, uint32_t calls, uint32_t executes, uint8_t flags,
                              uint8_t model) {
  if (report_.entry_count >= ETB_MAX_BACKENDS) {
    if (!truncated_) {
      truncated_ = true;
      append_message("report truncated: too many entries");
    }
    return;
  }
  etb_entry_t& entry = report_.entries[report_.entry_count++];
  entry = etb_entry_t{};
  entry.name = keep(name);
  entry.status = status;
  entry.calls = static_cast<uint16_t>(std::min<uint32_t>(calls, UINT16_MAX));
  entry.executes = static_cast<uint16_t>(std::min<uint32_t>(executes, UINT16_MAX));
  entry.flags = flags;
  entry.model = model;
  entry.options = options_.data() + options_.size();
  entry.option_count = 0;
}

void ReportBuilder::add_option(const executorch::runtime::BackendOption& option) {
  if (report_.entry_count == 0) {
    return;
  }
  etb_entry_t& entry = report_.entries[report_.entry_count - 1];
  if (entry.option_count >= ETB_MAX_OPTIONS) {
    if (!truncated_) {
      truncated_ = true;
      append_message("report truncated: too many options in one entry");
    }
    return;
  }
  etb_option_t* out = next_option(options_, kOptionPool, "options");
  if (out == nullptr) {
    return;
  }
  out->key = keep(option_key(option));
  if (const bool* b = std::get_if<bool>(&option.value)) {
    out->type = ETB_TYPE_BOOL;
    out->b = *b;
  } else if (const int* i = std::get_if<int>(&option.value)) {
    out->type = ETB_TYPE_INT;
    out->i = *i;
  } else {
    out->type = ETB_TYPE_STRING;
    out->s = keep(option_string(std::get<2>(option.value)));
  }
  ++entry.option_count;
}

etb_status_t ReportBuilder::encode(uint8_t* buf, size_t cap, size_t* out_len) {
  message_ = well_formed_utf8(message_);
  report_.message = keep(utf8_prefix(message_, ETB_MAX_TEXT));
  etb_status_t status = etb_encode_report(&report_, buf, cap, out_len);
  if (status == ETB_OK || status == ETB_ERR_CAPACITY) {
    return status;
  }
  // The runtime or a backend produced something the wire cannot carry (a key
  // that is empty or not UTF-8, say): say so rather than send nothing.
  const uint32_t seq = report_.seq;
  const uint8_t action = report_.action;
  const std::string reason = std::string("report not encodable: ") + etb_status_name(status) +
                             " in what the runtime returned; original message: " + message_;
  start(seq, action);
  set_outcome(ETB_OUTCOME_RUNTIME_ERROR, 0x01 /* Error::Internal */, reason);
  report_.message = keep(utf8_prefix(message_, ETB_MAX_TEXT));
  return etb_encode_report(&report_, buf, cap, out_len);
}

}  // namespace etb
