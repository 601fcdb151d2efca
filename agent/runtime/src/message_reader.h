// SPDX-License-Identifier: BSD-3-Clause
// Reads wire-format messages back to back from a file descriptor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "etb/wire.h"

namespace etb {

// Cuts a byte stream into units by the rules of docs/wire-format.md, "Stream
// reading": each call to next() returns one unit, which gets one report. A
// refused header is returned as soon as its 16 bytes are read; the rest of its
// unit (a message of usable length, or the bytes up to the next magic) is
// discarded by the following call. Buffers are bounded by max_message.
class MessageReader {
 public:
  enum class Kind {
    kMessage,   // data/size hold one whole message whose header is valid
    kRejected,  // a refused unit: error says why
    kEnd,       // end of input (or a read error, logged)
  };

  struct Item {
    Kind kind = Kind::kEnd;
    const uint8_t* data = nullptr;  // valid until the next call to next()
    size_t size = 0;
    uint32_t seq = 0;     // bytes 12..15 of the unit's first 16; 0 if the input ended sooner
    uint8_t version = 0;  // byte 4 of the unit's first 16, for a VERSION refusal's message
    etb_status_t error = ETB_OK;
  };

  // expected_type: ETB_MSG_REQUEST for a device.
  MessageReader(int fd, uint8_t expected_type, size_t max_message);

  Item next();

 private:
  // Makes at least n bytes available; false at end of input.
  bool fill(size_t n);
  size_t available() const { return end_ - start_; }
  const uint8_t* head() const { return buffer_.data() + start_; }
  void drop(size_t n) { start_ += n; }
  // Discards the next n bytes; false if the input ends first.
  bool discard(size_t n);
  // Drops the refused unit's first byte and the bytes up to the next magic;
  // false at end of input.
  bool resynchronise();

  int fd_;
  uint8_t expected_type_;
  size_t max_message_;
  std::vector<uint8_t> buffer_;
  size_t start_ = 0;
  size_t end_ = 0;
  size_t pending_drop_ = 0;  // size of the message handed out last
  size_t pending_skip_ = 0;  // rest of a refused unit of usable length
  bool resyncing_ = false;   // the last unit was refused and ends at the next magic
  bool eof_ = false;
};

}  // namespace etb
