// SPDX-License-Identifier: BSD-3-Clause
#include "text_arena.h"

#include <algorithm>
#include <cstring>

namespace etb {

TextArena::TextArena(size_t block_size) : block_size_(block_size) {}

void TextArena::clear() {
  current_ = 0;
  used_ = 0;
}

std::string_view TextArena::copy_at_end(std::string_view text) {
  char* out = blocks_[current_].bytes.get() + used_;
  if (!text.empty()) {
    std::memcpy(out, text.data(), text.size());
  }
  used_ += text.size();
  return std::string_view(out, text.size());
}

std::string_view TextArena::keep_in_next_block(std::string_view text) {
  // The first block after the current one with room for text; the blocks
  // skipped stay unused until clear().
  do {
    ++current_;
  } while (current_ < blocks_.size() && blocks_[current_].size < text.size());
  if (current_ >= blocks_.size()) {
    current_ = blocks_.size();
    const size_t size = std::max(block_size_, text.size());
    blocks_.push_back(Block{std::make_unique<char[]>(size), size});
  }
  used_ = 0;
  return copy_at_end(text);
}

}  // namespace etb
