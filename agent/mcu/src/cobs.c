/* SPDX-License-Identifier: BSD-3-Clause */
/* cobs.c - COBS encoding and decoding (see mcu_cobs.h). */
#include "mcu_cobs.h"

size_t cobs_encode(const uint8_t* in, size_t len, uint8_t* out) {
  size_t code_at = 0; /* where the current block's code byte goes */
  size_t w = 1;
  size_t r;
  uint8_t code = 1;
  for (r = 0; r < len; r++) {
    if (in[r] == 0u) {
      out[code_at] = code;
      code_at = w++;
      code = 1;
      continue;
    }
    out[w++] = in[r];
    code++;
    if (code == 0xFFu && r + 1u < len) {
      out[code_at] = code;
      code_at = w++;
      code = 1;
    }
  }
  out[code_at] = code;
  return w;
}

bool cobs_decode(const uint8_t* in, size_t len, uint8_t* out, size_t cap, size_t* out_len) {
  size_t r = 0;
  size_t w = 0;
  while (r < len) {
    uint8_t code = in[r++];
    size_t run;
    if (code == 0u) {
      return false;
    }
    run = (size_t)code - 1u;
    if (run > len - r || run > cap - w) {
      return false;
    }
    while (run-- > 0u) {
      if (in[r] == 0u) {
        return false;
      }
      out[w++] = in[r++];
    }
    if (code != 0xFFu && r < len) {
      if (w >= cap) {
        return false;
      }
      out[w++] = 0u;
    }
  }
  *out_len = w;
  return true;
}
