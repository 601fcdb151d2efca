/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_cobs.h - Consistent Overhead Byte Stuffing (Cheshire and Baker, 1999).
 *
 * Encoded data contains no 0x00 byte, so 0x00 delimits frames on the wire and a
 * receiver resynchronises at the next 0x00 after any garbage. The encoding is
 * the one of the `cobs` Python package used by the host.
 */
#ifndef MCU_COBS_H
#define MCU_COBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Encoded size of len bytes, worst case. */
#define COBS_MAX_ENCODED(len) ((len) + ((len) + 253u) / 254u + 1u)

/* Encodes in[0..len) into out (at least COBS_MAX_ENCODED(len) bytes); returns the size. */
size_t cobs_encode(const uint8_t* in, size_t len, uint8_t* out);

/*
 * Decodes in[0..len) (one frame, delimiter removed) into out[0..cap).
 * False if the bytes are not valid COBS or do not fit.
 */
bool cobs_decode(const uint8_t* in, size_t len, uint8_t* out, size_t cap, size_t* out_len);

#endif /* MCU_COBS_H */
