// SPDX-License-Identifier: BSD-3-Clause
// Storage for the texts of one report, reused from report to report.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

namespace etb {

// Copies texts into blocks that never move, so the views it hands out stay
// valid until clear(). clear() keeps the blocks: once a report of a given size
// has been built, building another one of that size allocates nothing.
class TextArena {
 public:
  explicit TextArena(size_t block_size);
  TextArena(const TextArena&) = delete;
  TextArena& operator=(const TextArena&) = delete;

  // Forgets every text kept so far (their views become invalid).
  void clear();

  // A copy of text that lives until clear(); never a null pointer.
  std::string_view keep(std::string_view text) {
    if (current_ < blocks_.size() && blocks_[current_].size - used_ >= text.size()) {
      return copy_at_end(text);
    }
    return keep_in_next_block(text);
  }

 private:
  std::string_view copy_at_end(std::string_view text);
  std::string_view keep_in_next_block(std::string_view text);

  struct Block {
    std::unique_ptr<char[]> bytes;
    size_t size;
  };

  size_t block_size_;
  std::vector<Block> blocks_;
  size_t current_ = 0;  // the block being filled
  size_t used_ = 0;     // bytes used in it
};

}  // namespace etb
