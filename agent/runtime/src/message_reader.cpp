#include "message_reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace etb {

namespace {

constexpr uint8_t kMagic[4] = {'E', 'T', 'B', 'O'};

uint32_t read_u32le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
      (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

MessageReader::MessageReader(int fd, size_t max_message)
    : fd_(fd), max_message_(max_message), buffer_(max_message + ETB_HEADER_SIZE) {}

bool MessageReader::fill(size_t n) {
  if (available() >= n) {
    return true;
  }
  if (start_ + n > buffer_.size()) {
    std::memmove(buffer_.data(), head(), available());
    end_ = available();
    start_ = 0;
  }
  while (available() < n && !eof_) {
    const ssize_t got = ::read(fd_, buffer_.data() + end_, buffer_.size() - end_);
    if (got > 0) {
      end_ += static_cast<size_t>(got);
    } else if (got == 0) {
      eof_ = true;
    } else if (errno != EINTR) {
      std::fprintf(stderr, "et-agent: read failed: %s\n", std::strerror(errno));
      eof_ = true;
    }
  }
  return available() >= n;
}

bool MessageReader::starts_with_garbage() {
  // Decide as soon as the bytes at hand differ from the magic, so a host that
  // sent a few stray bytes gets its REJECTED report without sending more.
  for (size_t i = 0; i < sizeof(kMagic); ++i) {
    if (!fill(i + 1)) {
      return false;  // end of input inside a possible magic: handled by the caller
    }
    if (head()[i] != kMagic[i]) {
      return true;
    }
  }
  return false;
}

bool MessageReader::resynchronise() {
  for (;;) {
    const uint8_t* found = nullptr;
    const size_t n = available();
    for (size_t i = 0; i + sizeof(kMagic) <= n; ++i) {
      if (std::memcmp(head() + i, kMagic, sizeof(kMagic)) == 0) {
        found = head() + i;
        break;
      }
    }
    if (found != nullptr) {
      drop(static_cast<size_t>(found - head()));
      return true;
    }
    // Keep a possible partial magic at the end, drop the rest, read more.
    const size_t keep = n < sizeof(kMagic) - 1 ? n : sizeof(kMagic) - 1;
    drop(n - keep);
    if (!fill(available() + 1)) {
      drop(available());
      return false;
    }
  }
}

MessageReader::Item MessageReader::next() {
  drop(pending_drop_);
  pending_drop_ = 0;
  Item item;
  if (resyncing_) {
    resyncing_ = false;
    if (!resynchronise()) {
      return item;  // kEnd
    }
  }
  if (!fill(1)) {
    return item;  // clean end of input
  }
  if (starts_with_garbage()) {
    item.kind = Kind::kRejected;
    item.error = ETB_ERR_BAD_MAGIC;
    drop(1);
    resyncing_ = true;
    return item;
  }
  if (!fill(ETB_HEADER_SIZE)) {
    item.kind = Kind::kRejected;
    item.error = ETB_ERR_TRUNCATED;
    drop(available());
    return item;
  }
  etb_header_t header{};
  const etb_status_t status = etb_peek_header(head(), ETB_HEADER_SIZE, max_message_, &header);
  item.seq = read_u32le(head() + 12);
  // Bytes 0..15 keep their meaning in every version, so a message of another
  // version or type can be skipped whole when its length is plausible.
  const uint32_t length = read_u32le(head() + 8);
  const bool length_ok = length >= ETB_MIN_MESSAGE && length <= max_message_;
  if (status != ETB_OK && (status == ETB_ERR_LENGTH || !length_ok)) {
    item.kind = Kind::kRejected;
    item.error = status;
    drop(1);
    resyncing_ = true;
    return item;
  }
  if (!fill(length)) {
    item.kind = Kind::kRejected;
    item.error = ETB_ERR_TRUNCATED;
    drop(available());
    return item;
  }
  pending_drop_ = length;
  if (status != ETB_OK) {
    item.kind = Kind::kRejected;
    item.error = status;
    return item;
  }
  item.kind = Kind::kMessage;
  item.data = head();
  item.size = length;
  return item;
}

}  // namespace etb
