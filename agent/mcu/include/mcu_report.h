/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_report.h - the report under construction: one per request, built in
 * static buffers (message 512 bytes, ETB_MAX_FACTS facts, ETB_MAX_BACKENDS
 * entries) and encoded into the link's report buffer.
 */
#ifndef MCU_REPORT_H
#define MCU_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include <executorch/runtime/core/error.h>

#include "etb/wire.h"

namespace mcu {

void report_start(uint32_t seq, uint8_t action);
void report_set_action(uint8_t action);

/* The message: bytes appended, cut at a UTF-8 character boundary when full. */
void append_bytes(const uint8_t* bytes, size_t len);
void append_text(const char* s);
void append_str(etb_str_t s);
void append_number(size_t value);
/* Starts a new clause of the message ("a; b"). */
void message_clause(const char* s);

void report_outcome(uint8_t outcome, uint32_t detail, const char* message);
void report_runtime_error(executorch::runtime::Error error, const char* message);
bool report_failed();
bool report_rejected(); /* outcome REJECTED: the request was refused */

void fact_int(const char* key, size_t value);
void fact_text(const char* key, const char* value);
void fact_bool(const char* key, bool value);

/* An entry; past ETB_MAX_BACKENDS entries it is dropped and the message says so. */
void add_entry(etb_str_t name, uint32_t status, uint32_t calls, uint32_t executes, uint8_t flags,
               const etb_option_t* options, size_t count, uint8_t model = 0);

/* Encodes the report; one that does not fit is replaced by a short one that says so. */
size_t finish_report(uint8_t* out, size_t cap);

}  // namespace mcu

#endif /* MCU_REPORT_H */
