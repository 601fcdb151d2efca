// SPDX-License-Identifier: BSD-3-Clause
/* report.cpp - the report under construction (see mcu_report.h). */
#include "mcu_report.h"

#include <string.h>

namespace mcu {
namespace {

constexpr size_t kMessageCap = 512;

etb_report_t rep;
etb_option_t facts[ETB_MAX_FACTS];
uint8_t text[kMessageCap];
bool entries_dropped, facts_dropped;

etb_option_t* next_fact(const char* key) {
  if (rep.fact_count == ETB_MAX_FACTS) {
    facts_dropped = true;
    return nullptr;
  }
  etb_option_t* fact = &facts[rep.fact_count++];
  memset(fact, 0, sizeof *fact);
  fact->key = etb_cstr(key);
  return fact;
}

}  // namespace

void report_start(uint32_t seq, uint8_t action) {
  memset(&rep, 0, sizeof rep);
  rep.seq = seq;
  rep.action = action;
  rep.outcome = ETB_OUTCOME_OK;
  rep.facts = facts;
  rep.message.ptr = text;
  entries_dropped = facts_dropped = false;
}

void report_set_action(uint8_t action) { rep.action = action; }

void append_bytes(const uint8_t* bytes, size_t len) {
  size_t room = kMessageCap - rep.message.len;
  if (len > room) {
    len = room;
    while (len > 0u && (bytes[len] & 0xC0u) == 0x80u) {
      len--;
    }
  }
  if (len > 0u) {
    memcpy(&text[rep.message.len], bytes, len);
  }
  rep.message.len = static_cast<uint16_t>(rep.message.len + len);
}

void append_text(const char* s) { append_bytes(reinterpret_cast<const uint8_t*>(s), strlen(s)); }

void append_str(etb_str_t s) { append_bytes(s.ptr, s.len); }

void append_number(size_t value) {
  char digits[12];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10u);
    value /= 10u;
  } while (value != 0u);
  while (n > 0u) {
    append_bytes(reinterpret_cast<const uint8_t*>(&digits[--n]), 1u);
  }
}

void message_clause(const char* s) {
  if (rep.message.len > 0u) {
    append_text("; ");
  }
  append_text(s);
}

void report_outcome(uint8_t outcome, uint32_t detail, const char* message) {
  rep.outcome = outcome;
  rep.detail = detail;
  message_clause(message);
}

void report_runtime_error(executorch::runtime::Error error, const char* message) {
  report_outcome(ETB_OUTCOME_RUNTIME_ERROR, static_cast<uint32_t>(error), message);
}

bool report_failed() { return rep.outcome != ETB_OUTCOME_OK; }

bool report_rejected() { return rep.outcome == ETB_OUTCOME_REJECTED; }

void fact_int(const char* key, size_t value) {
  etb_option_t* fact = next_fact(key);
  if (fact != nullptr) {
    fact->type = ETB_TYPE_INT;
    fact->i = value > static_cast<size_t>(INT32_MAX) ? INT32_MAX : static_cast<int32_t>(value);
  }
}

void fact_text(const char* key, const char* value) {
  etb_option_t* fact = next_fact(key);
  if (fact != nullptr) {
    fact->type = ETB_TYPE_STRING;
    fact->s = etb_cstr(value);
  }
}

void fact_bool(const char* key, bool value) {
  etb_option_t* fact = next_fact(key);
  if (fact != nullptr) {
    fact->type = ETB_TYPE_BOOL;
    fact->b = value;
  }
}

void add_entry(etb_str_t name, uint32_t status, uint32_t calls, uint32_t executes, uint8_t flags,
               const etb_option_t* options, size_t count, uint8_t model) {
  if (rep.entry_count == ETB_MAX_BACKENDS) {
    entries_dropped = true;
    return;
  }
  etb_entry_t* entry = &rep.entries[rep.entry_count++];
  entry->name = name;
  entry->status = status;
  entry->calls = static_cast<uint16_t>(calls);
  entry->executes = static_cast<uint16_t>(executes);
  entry->flags = flags;
  entry->model = model;
  entry->options = count > 0u ? options : nullptr;
  entry->option_count = static_cast<uint8_t>(count);
}

size_t finish_report(uint8_t* out, size_t cap) {
  if (entries_dropped) {
    message_clause("report truncated: too many entries");
  }
  if (facts_dropped) {
    message_clause("report truncated: too many facts");
  }
  size_t len = 0;
  etb_status_t status = etb_encode_report(&rep, out, cap, &len);
  if (status != ETB_OK) {
    report_start(rep.seq, rep.action);
    report_outcome(ETB_OUTCOME_REJECTED, status, "the report could not be encoded: ");
    append_text(etb_status_name(status));
    append_text(" (larger than the device's report buffer)");
    if (etb_encode_report(&rep, out, cap, &len) != ETB_OK) {
      len = 0;
    }
  }
  return len;
}

}  // namespace mcu
