// SPDX-License-Identifier: BSD-3-Clause
/* program_store.cpp - the uploaded programs (see mcu_program.h). */
#include "mcu_program.h"

#include <string.h>

namespace mcu {
namespace {

struct ProgramSlot {
  /* Flatbuffers want their buffer aligned as the widest scalar they hold. */
  alignas(16) uint8_t bytes[MCU_PROGRAM_BYTES];
  size_t size; /* 0: no program held */
  uint32_t crc;
  uint32_t used; /* use clock at the last hold or pin: the least recent is replaced first */
  uint8_t pins;  /* loaded models using it */
  char name[MCU_PROGRAM_NAME_BYTES];
};

ProgramSlot slots[MCU_PROGRAM_SLOTS];
int receiving = -1; /* the slot of the upload under way */
size_t received;    /* its bytes so far */
int last_held = -1; /* the slot of the program held last */
uint32_t use_clock;
char held_names[MCU_PROGRAM_SLOTS * MCU_PROGRAM_NAME_BYTES];

constexpr UploadAnswer ok(const char* message) { return {ETB_OUTCOME_OK, 0u, message}; }

constexpr UploadAnswer refuse(etb_status_t detail, const char* message) {
  return {ETB_OUTCOME_REJECTED, static_cast<uint32_t>(detail), message};
}

/* The slot a new upload takes: a free one, else the least recently used program's. */
int slot_for_upload() {
  int best = 0;
  for (size_t k = 0; k < MCU_PROGRAM_SLOTS; k++) {
    if (slots[k].size == 0u) {
      return static_cast<int>(k);
    }
    if (slots[k].used < slots[best].used) {
      best = static_cast<int>(k);
    }
  }
  return best;
}

void drop_upload() {
  receiving = -1;
  received = 0;
}

void name_of(uint32_t crc, char (&out)[MCU_PROGRAM_NAME_BYTES]) {
  static const char hex[] = "0123456789abcdef";
  for (size_t k = 0; k < 8u; k++) {
    out[k] = hex[(crc >> (28u - 4u * k)) & 0xFu];
  }
  out[8] = '\0';
}

bool valid(int slot) { return slot >= 0 && static_cast<size_t>(slot) < MCU_PROGRAM_SLOTS; }

}  // namespace

UploadAnswer program_data(uint32_t offset, const uint8_t* chunk, size_t count) {
  if (offset == 0u) {
    drop_upload();
    int slot = slot_for_upload();
    if (slots[slot].pins != 0u) {
      return refuse(ETB_ERR_CAPACITY,
                    "PROGRAM_DATA: every program slot holds a program a "
                    "loaded model uses (arenas in HELLO)");
    }
    if (slot == last_held) {
      last_held = -1;
    }
    slots[slot].size = 0;
    receiving = slot;
  } else if (receiving < 0 || offset != received) {
    return refuse(ETB_ERR_UNEXPECTED_FIELD,
                  "PROGRAM_DATA: offset is not where the upload under way ends; the upload "
                  "is dropped (start again at 0)");
  }
  if (count > MCU_PROGRAM_BYTES - received) {
    drop_upload();
    return refuse(ETB_ERR_CAPACITY,
                  "PROGRAM_DATA: the program is larger than this device holds (max_program in "
                  "HELLO); the upload is dropped");
  }
  if (count != 0u) {
    memcpy(&slots[receiving].bytes[received], chunk, count);
  }
  received += count;
  return ok("chunk stored");
}

UploadAnswer program_end(uint32_t size, uint32_t crc) {
  if (receiving < 0 || size == 0u || size != received) {
    drop_upload();
    return refuse(ETB_ERR_LENGTH,
                  "PROGRAM_END: size is not the number of bytes uploaded since offset 0; the "
                  "upload is dropped");
  }
  ProgramSlot& slot = slots[receiving];
  if (etb_crc32(0u, slot.bytes, received) != crc) {
    drop_upload();
    return refuse(ETB_ERR_CRC,
                  "PROGRAM_END: the CRC-32 of the uploaded bytes differs; the "
                  "upload is dropped");
  }
  slot.size = received;
  slot.crc = crc;
  slot.used = ++use_clock;
  name_of(crc, slot.name);
  last_held = receiving;
  drop_upload();
  return ok("program held");
}

void program_drop_upload() { drop_upload(); }

bool program_slot_free() { return slots[slot_for_upload()].pins == 0u; }

int program_find(etb_str_t name) {
  if (name.len == 0u) {
    return last_held;
  }
  for (size_t k = 0; k < MCU_PROGRAM_SLOTS; k++) {
    const ProgramSlot& slot = slots[k];
    if (slot.size != 0u && name.len == 8u && memcmp(name.ptr, slot.name, 8u) == 0) {
      return static_cast<int>(k);
    }
  }
  return -1;
}

const uint8_t* program_bytes(int slot) { return valid(slot) ? slots[slot].bytes : nullptr; }

size_t program_size(int slot) { return valid(slot) ? slots[slot].size : 0u; }

const char* program_name(int slot) { return valid(slot) ? slots[slot].name : ""; }

void program_pin(int slot) {
  if (valid(slot)) {
    slots[slot].pins++;
    slots[slot].used = ++use_clock;
  }
}

void program_unpin(int slot) {
  if (valid(slot) && slots[slot].pins > 0u) {
    slots[slot].pins--;
  }
}

size_t program_last_size() { return program_size(last_held); }

size_t program_received() { return received; }

const char* programs_held() {
  size_t len = 0;
  for (const ProgramSlot& slot : slots) {
    if (slot.size != 0u) {
      if (len > 0u) {
        held_names[len++] = ',';
      }
      memcpy(&held_names[len], slot.name, 8u);
      len += 8u;
    }
  }
  held_names[len] = '\0';
  return held_names;
}

}  // namespace mcu
