// SPDX-License-Identifier: BSD-3-Clause
/*
 * mcu_program.h - the program the firmware holds (firmware built from an
 * ExecuTorch source tree only) and its upload, actions 9 PROGRAM_DATA and
 * 10 PROGRAM_END (docs/wire-format.md, "Program upload").
 *
 * The store is a static buffer of MCU_PROGRAM_BYTES. PROGRAM_DATA at offset 0
 * starts a new upload (the held program is dropped); later chunks must continue
 * exactly where the previous one ended. PROGRAM_END gives the size and CRC-32 of
 * the whole program: when both match what was received the program is held and
 * the next LOAD runs Program::load over it (a BufferDataLoader on the store).
 */
#ifndef MCU_PROGRAM_H
#define MCU_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#ifndef MCU_PROGRAM_BYTES
#define MCU_PROGRAM_BYTES 4096u
#endif

namespace mcu {

struct UploadAnswer {
  uint8_t outcome; /* ETB_OUTCOME_* */
  uint32_t detail; /* etb_status_t when REJECTED */
  const char *message;
};

/* body: the bytes after the action byte, up to the message's CRC. */
UploadAnswer program_data(const uint8_t *body, size_t len);
UploadAnswer program_end(const uint8_t *body, size_t len);

/* The held program, or nullptr (none uploaded, or an upload is under way). */
const uint8_t *program_bytes();
size_t program_size();
size_t program_received();
uint32_t program_crc();

/* What the runtime's load of the held program used (DelegateMethod::load, real/program_method.cpp). */
struct MethodMemory {
  size_t method_arena;  /* bytes of the method allocator's static arena */
  size_t method_used;   /* its high-water mark after the last load */
  size_t planned_arena; /* bytes for memory-planned buffers */
  size_t planned_bytes; /* what the method's plan asked for */
  size_t temp_arena;
  size_t temp_used;
};
const MethodMemory &method_memory();

/* Why the last DelegateMethod::load failed, for the report; nullptr: the runtime's error says it. */
const char *method_failure();

}  // namespace mcu

#endif /* MCU_PROGRAM_H */
