// SPDX-License-Identifier: BSD-3-Clause
/* options.cpp - wire options <-> executorch::runtime::BackendOption (see mcu_options.h). */
#include "mcu_options.h"

#include <string.h>

#include "etb/runtime_fit.hpp" /* the wire's limits fit this tree's, or the build fails */

namespace mcu {

using executorch::runtime::kMaxOptionValueLength;

namespace {

bool same_bytes(etb_str_t a, etb_str_t b) {
  return a.len == b.len && (a.len == 0u || memcmp(a.ptr, b.ptr, a.len) == 0);
}

}  // namespace

void option_from_wire(const etb_option_t& wire, BackendOption& out) {
  /* The codec bounds keys at 63 and strings at 255 bytes: both fit with their NUL. */
  memset(out.key, 0, sizeof out.key);
  memcpy(out.key, wire.key.ptr, wire.key.len);
  switch (wire.type) {
    case ETB_TYPE_BOOL:
      out.value = wire.b;
      break;
    case ETB_TYPE_INT:
      out.value = static_cast<int>(wire.i); /* int32_t is long on arm-none-eabi */
      break;
    default: {
      std::array<char, kMaxOptionValueLength> text{};
      memcpy(text.data(), wire.s.ptr, wire.s.len);
      out.value = text;
      break;
    }
  }
}

etb_option_t option_view(const BackendOption& option) {
  etb_option_t view{};
  view.key = text_view(option.key);
  if (const bool* b = std::get_if<bool>(&option.value)) {
    view.type = ETB_TYPE_BOOL;
    view.b = *b;
  } else if (const int* i = std::get_if<int>(&option.value)) {
    view.type = ETB_TYPE_INT;
    view.i = *i;
  } else if (const auto* s = std::get_if<std::array<char, kMaxOptionValueLength>>(&option.value)) {
    view.type = ETB_TYPE_STRING;
    view.s = text_view(s->data());
  }
  return view;
}

void copy_id(etb_str_t id, char (&out)[ETB_MAX_ID + 1u]) {
  size_t len = id.len < ETB_MAX_ID ? id.len : ETB_MAX_ID;
  if (len > 0u) {
    memcpy(out, id.ptr, len);
  }
  out[len] = '\0';
}

etb_str_t text_view(const char* text) {
  etb_str_t view;
  view.ptr = reinterpret_cast<const uint8_t*>(text);
  view.len = static_cast<uint16_t>(strlen(text));
  return view;
}

bool same_option(const etb_option_t& a, const etb_option_t& b) {
  if (!same_bytes(a.key, b.key) || a.type != b.type) {
    return false;
  }
  switch (a.type) {
    case ETB_TYPE_BOOL:
      return a.b == b.b;
    case ETB_TYPE_INT:
      return a.i == b.i;
    default:
      return same_bytes(a.s, b.s);
  }
}

}  // namespace mcu
