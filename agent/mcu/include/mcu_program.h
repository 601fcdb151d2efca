// SPDX-License-Identifier: BSD-3-Clause
/*
 * mcu_program.h - the programs the firmware holds (firmware built from an
 * ExecuTorch source tree only) and their upload, actions 9 PROGRAM_DATA and
 * 10 PROGRAM_END (docs/wire-format.md, "Program upload").
 *
 * The store is MCU_PROGRAM_SLOTS static slots of MCU_PROGRAM_BYTES each
 * (boards/<board>/board.h). PROGRAM_DATA at offset 0 starts a new upload into a
 * slot: a free one, else the least recently held or loaded program's (if loaded
 * models use that one, the agent unloads them first: program_slot_free); later
 * chunks must continue exactly where the previous one ended. PROGRAM_END
 * gives the size and CRC-32 of the whole program: when both match what was
 * received the program is held, named by its CRC-32 as 8 lowercase hex digits.
 * A LOAD's `program` names a held program that way; empty names the one held
 * last. A loaded model pins its program's slot until it is unloaded.
 */
#ifndef MCU_PROGRAM_H
#define MCU_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "board.h"
#include "etb/wire.h"

#define MCU_PROGRAM_NAME_BYTES 9u /* 8 hex digits and NUL */

namespace mcu {

struct UploadAnswer {
  uint8_t outcome; /* ETB_OUTCOME_* */
  uint32_t detail; /* etb_status_t when REJECTED */
  const char* message;
};

/* The fields of a decoded PROGRAM_DATA and PROGRAM_END (etb_decode_upload). */
UploadAnswer program_data(uint32_t offset, const uint8_t* chunk, size_t count);
UploadAnswer program_end(uint32_t size, uint32_t crc);

/* Drops the upload under way, if any (held programs stay): the device refused a request. */
void program_drop_upload();

/* Whether the slot an upload starting now takes is one no loaded model pins. */
bool program_slot_free();

/* The slot holding the program `name` names (empty: the one held last), or -1. */
int program_find(etb_str_t name);
const uint8_t* program_bytes(int slot);
size_t program_size(int slot);
const char* program_name(int slot);
void program_pin(int slot); /* a loaded model uses it; marks it recently used */
void program_unpin(int slot);

/* Bytes of the program held last (0: none) and of the upload under way. */
size_t program_last_size();
size_t program_received();
/* The names of the held programs, comma-separated, in slot order. */
const char* programs_held();

/* What the loads of the current models used (real/program_method.cpp). */
struct MethodMemory {
  size_t method_arena;  /* bytes of the methods' static arena */
  size_t method_used;   /* what the loaded methods' allocators took of it */
  size_t planned_arena; /* bytes for memory-planned buffers */
  size_t planned_bytes; /* what the loaded methods' plans asked for */
  size_t temp_arena;
  size_t temp_used; /* the temp allocator's high-water mark after the last execute */
};
const MethodMemory& method_memory();

}  // namespace mcu

#endif /* MCU_PROGRAM_H */
