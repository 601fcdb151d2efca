// Reads wire-format messages back to back from a file descriptor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "etb/wire.h"

namespace etb {

// Splits a byte stream into messages using their 16-byte headers
// (docs/wire-format.md, "Decoding"). Bytes that cannot start a message are
// reported once per run as BAD_MAGIC or LENGTH and then skipped until the next
// magic. Buffers are bounded by max_message.
class MessageReader {
 public:
  enum class Kind {
    kMessage,   // data/size hold one whole message whose header is valid
    kRejected,  // error says why; seq is the header's when it could be read
    kEnd,       // end of input (or a read error, logged)
  };

  struct Item {
    Kind kind = Kind::kEnd;
    const uint8_t* data = nullptr;  // valid until the next call to next()
    size_t size = 0;
    uint32_t seq = 0;  // from the header; 0 when none could be read (BAD_MAGIC, short input)
    etb_status_t error = ETB_OK;
  };

  MessageReader(int fd, size_t max_message);

  Item next();

 private:
  // Makes at least n bytes available; false at end of input.
  bool fill(size_t n);
  size_t available() const { return end_ - start_; }
  const uint8_t* head() const { return buffer_.data() + start_; }
  void drop(size_t n) { start_ += n; }
  // Skips bytes until the buffer starts with the magic; false at end of input.
  bool resynchronise();
  // The first bytes available do not start the magic (reads only as needed).
  bool starts_with_garbage();

  int fd_;
  size_t max_message_;
  std::vector<uint8_t> buffer_;
  size_t start_ = 0;
  size_t end_ = 0;
  size_t pending_drop_ = 0;  // size of the message handed out last
  bool resyncing_ = false;
  bool eof_ = false;
};

}  // namespace etb
