// SPDX-License-Identifier: BSD-3-Clause
// Conversions between wire-format options and the runtime's BackendOption.
#pragma once

#include <executorch/runtime/backend/options.h>

#include <string_view>

#include "etb/wire.h"

namespace etb {

using executorch::runtime::BackendOption;

// Makes out hold the key and value of a decoded wire option, as a freshly
// constructed BackendOption would (unused key and string bytes are zero), in
// place so that arrays of options can be reused. Keys are written into
// BackendOption directly because they are only known at run time
// (BackendOptions<N>::set_option accepts only compile-time keys). The codec has
// already checked the limits (key <= 63 bytes, string <= 255 bytes, no NUL), so
// both fit with their terminating NUL.
void to_runtime_option(const etb_option_t& option, BackendOption& out);

// The key of a runtime option, up to its first NUL (at most 63 bytes).
std::string_view option_key(const BackendOption& option);

// The string value of a runtime option, up to its first NUL (at most 255 bytes).
std::string_view option_string(const std::array<char, executorch::runtime::kMaxOptionValueLength>& value);

// The bytes of a wire string.
inline std::string_view view(etb_str_t s) { return std::string_view(reinterpret_cast<const char*>(s.ptr), s.len); }

}  // namespace etb
