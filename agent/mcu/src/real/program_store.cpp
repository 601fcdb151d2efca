// SPDX-License-Identifier: BSD-3-Clause
/* program_store.cpp - the uploaded program (see mcu_program.h). */
#include "mcu_program.h"

#include <string.h>

#include "etb/wire.h"

namespace mcu {
namespace {

/* Flatbuffers want their buffer aligned as the widest scalar they hold. */
alignas(16) uint8_t store[MCU_PROGRAM_BYTES];
size_t received;  /* bytes of the upload under way (or of the held program) */
size_t held_size; /* 0: no program held */
uint32_t held_crc;

uint32_t get_u32(const uint8_t *p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

constexpr UploadAnswer ok(const char *message) { return {ETB_OUTCOME_OK, 0u, message}; }

constexpr UploadAnswer refuse(etb_status_t detail, const char *message) {
  return {ETB_OUTCOME_REJECTED, static_cast<uint32_t>(detail), message};
}

}  // namespace

UploadAnswer program_data(const uint8_t *body, size_t len) {
  if (len < 6u) {
    return refuse(ETB_ERR_TRUNCATED, "PROGRAM_DATA: the body ends before offset and length");
  }
  uint32_t offset = get_u32(body);
  size_t count = static_cast<size_t>(body[4]) | (static_cast<size_t>(body[5]) << 8);
  if (len - 6u < count) {
    return refuse(ETB_ERR_TRUNCATED, "PROGRAM_DATA: the body ends before its bytes");
  }
  if (len - 6u > count) {
    return refuse(ETB_ERR_TRAILING, "PROGRAM_DATA: bytes after the chunk");
  }
  if (offset == 0u) {
    received = 0;
    held_size = 0;
  } else if (held_size != 0u || offset != received) {
    return refuse(ETB_ERR_UNEXPECTED_FIELD,
                  "PROGRAM_DATA: offset is not where the upload under way ends (start at 0)");
  }
  if (count > MCU_PROGRAM_BYTES - received) {
    received = 0;
    return refuse(ETB_ERR_CAPACITY,
                  "PROGRAM_DATA: the program is larger than this device holds (max_program in "
                  "HELLO); the upload is dropped");
  }
  memcpy(&store[received], &body[6], count);
  received += count;
  return ok("chunk stored");
}

UploadAnswer program_end(const uint8_t *body, size_t len) {
  if (len != 8u) {
    return refuse(len < 8u ? ETB_ERR_TRUNCATED : ETB_ERR_TRAILING,
                  "PROGRAM_END: the body is size (u32) and crc (u32)");
  }
  uint32_t size = get_u32(body);
  uint32_t crc = get_u32(&body[4]);
  if (held_size != 0u || size == 0u || size != received) {
    received = 0;
    held_size = 0;
    return refuse(ETB_ERR_LENGTH,
                  "PROGRAM_END: size is not the number of bytes uploaded since offset 0; the "
                  "upload is dropped");
  }
  if (etb_crc32(0u, store, received) != crc) {
    received = 0;
    return refuse(ETB_ERR_CRC, "PROGRAM_END: the CRC-32 of the uploaded bytes differs; the "
                               "upload is dropped");
  }
  held_size = received;
  held_crc = crc;
  return ok("program held");
}

const uint8_t *program_bytes() { return held_size != 0u ? store : nullptr; }

size_t program_size() { return held_size; }

size_t program_received() { return received; }

uint32_t program_crc() { return held_crc; }

}  // namespace mcu
