// SPDX-License-Identifier: BSD-3-Clause
#include "runtime_options.h"

#include <algorithm>
#include <cstring>

#include "etb/runtime_fit.hpp"  // the wire's limits fit this tree's, or the build fails

namespace etb {

using executorch::runtime::kMaxOptionKeyLength;
using executorch::runtime::kMaxOptionValueLength;

void to_runtime_option(const etb_option_t& option, BackendOption& out) {
  const size_t key_len = std::min<size_t>(option.key.len, kMaxOptionKeyLength - 1);
  std::memset(out.key, 0, sizeof(out.key));
  std::memcpy(out.key, option.key.ptr, key_len);
  switch (option.type) {
    case ETB_TYPE_BOOL:
      out.value = option.b;
      break;
    case ETB_TYPE_INT:
      out.value = static_cast<int>(option.i);
      break;
    default: {
      // emplace value-initialises the array (all zero) where it lives.
      auto& text = out.value.emplace<std::array<char, kMaxOptionValueLength>>();
      const size_t len = std::min<size_t>(option.s.len, kMaxOptionValueLength - 1);
      std::memcpy(text.data(), option.s.ptr, len);
      break;
    }
  }
}

std::string_view option_key(const BackendOption& option) {
  return std::string_view(option.key, strnlen(option.key, kMaxOptionKeyLength - 1));
}

std::string_view option_string(const std::array<char, kMaxOptionValueLength>& value) {
  return std::string_view(value.data(), strnlen(value.data(), kMaxOptionValueLength - 1));
}

}  // namespace etb
