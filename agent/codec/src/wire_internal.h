/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_internal.h - rules shared by the decoder and the encoder of wire
 * format v2, so that both enforce the same limits in the same order.
 * Not part of the public API.
 */
#ifndef ETB_WIRE_INTERNAL_H
#define ETB_WIRE_INTERNAL_H

#include "etb/wire.h"

/* Return the status of expr unless it is ETB_OK. */
#define ETBI_TRY(expr)                  \
  do {                                  \
    etb_status_t etbi_status_ = (expr); \
    if (etbi_status_ != ETB_OK) {       \
      return etbi_status_;              \
    }                                   \
  } while (0)

#define ETBI_TYPE_OFFSET 5u
#define ETBI_LENGTH_OFFSET 8u

/* Bytes 0..3 of every message: ASCII "ETBO". */
extern const uint8_t etbi_magic[4];

/* A str's length limit, then NUL, then strict UTF-8 (RFC 3629). */
etb_status_t etbi_check_str(etb_str_t s, uint16_t min, uint16_t max, etb_status_t length_error);

/* Byte-wise equality. */
bool etbi_str_equal(etb_str_t a, etb_str_t b);

/* A count: UNEXPECTED_FIELD if max is 0 and count is not, over_error above max. */
etb_status_t etbi_check_count(uint8_t count, uint8_t max, etb_status_t over_error);

/* Request limits that depend on the action; 0 means the field must be empty. */
uint8_t etbi_max_delegates(uint8_t action);
uint8_t etbi_max_backends(uint8_t action);
uint8_t etbi_max_options(uint8_t action);
/* A LOAD's method map: up to ETB_MAX_LOAD_BACKENDS on module_both, else none. */
uint8_t etbi_max_method_backends(uint8_t path);

/* The program path: 0..1024 bytes for LOAD, empty for every other action. */
etb_status_t etbi_check_program(uint8_t action, etb_str_t program);

/* A report's action: one a request can carry (upload actions included), or NONE. */
bool etbi_report_action_known(uint8_t action);

#endif /* ETB_WIRE_INTERNAL_H */
