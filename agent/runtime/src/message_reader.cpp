// SPDX-License-Identifier: BSD-3-Clause
#include "message_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace etb {

namespace {

constexpr uint8_t kMagic[4] = {'E', 'T', 'B', 'O'};

uint32_t read_u32le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

MessageReader::MessageReader(int fd, uint8_t expected_type, size_t max_message)
    : fd_(fd), expected_type_(expected_type), max_message_(max_message), buffer_(max_message + ETB_HEADER_SIZE) {}

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

bool MessageReader::discard(size_t n) {
  for (;;) {
    const size_t now = std::min(n, available());
    drop(now);
    n -= now;
    if (n == 0) {
      return true;
    }
    if (!fill(1)) {
      return false;
    }
  }
}

bool MessageReader::resynchronise() {
  drop(1);  // the search for the next magic starts after the unit's first byte
  for (;;) {
    const size_t n = available();
    for (size_t i = 0; i + sizeof(kMagic) <= n; ++i) {
      if (std::memcmp(head() + i, kMagic, sizeof(kMagic)) == 0) {
        drop(i);
        return true;
      }
    }
    // Keep what may be the start of a magic, drop the rest, read more.
    drop(n - std::min(n, sizeof(kMagic) - 1));
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
  if (pending_skip_ > 0) {
    const size_t skip = pending_skip_;
    pending_skip_ = 0;
    if (!discard(skip)) {
      return item;  // kEnd: the input ended inside a refused unit
    }
  }
  if (resyncing_) {
    resyncing_ = false;
    if (!resynchronise()) {
      return item;  // kEnd
    }
  }
  if (!fill(ETB_HEADER_SIZE)) {
    if (available() == 0) {
      return item;  // clean end of input
    }
    item.kind = Kind::kRejected;  // 1..15 bytes at the end, whatever they are
    item.error = ETB_ERR_TRUNCATED;
    drop(available());
    return item;
  }
  item.seq = read_u32le(head() + 12);
  item.version = head()[4];
  etb_header_t header{};
  const etb_status_t status = etb_peek_header(head(), ETB_HEADER_SIZE, max_message_, expected_type_, &header);
  if (status != ETB_OK) {
    // Answered now, before the rest of the unit is read.
    item.kind = Kind::kRejected;
    item.error = status;
    const uint32_t length = read_u32le(head() + 8);
    if (status != ETB_ERR_BAD_MAGIC && length >= ETB_MIN_MESSAGE && length <= ETB_MAX_MESSAGE) {
      drop(ETB_HEADER_SIZE);
      pending_skip_ = length - ETB_HEADER_SIZE;
    } else {
      resyncing_ = true;
    }
    return item;
  }
  if (!fill(header.length)) {
    item.kind = Kind::kRejected;
    item.error = ETB_ERR_TRUNCATED;
    drop(available());
    return item;
  }
  pending_drop_ = header.length;
  item.kind = Kind::kMessage;
  item.data = head();
  item.size = header.length;
  return item;
}

}  // namespace etb
