// SPDX-License-Identifier: BSD-3-Clause
#include "owned_options_map.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "runtime_options.h"

namespace etb {

namespace {

// LOAD directives: keys a request cannot otherwise express. "etb.dup:KEY" is
// delivered as KEY, so a span can hold one key twice; "etb.id_suffix" (string)
// is appended to the backend id given to set_options and not delivered.
constexpr std::string_view kDupPrefix = "etb.dup:";
constexpr std::string_view kIdSuffixKey = "etb.id_suffix";

}  // namespace

et::Error OwnedOptionsMap::build(const etb_backend_t* backends, uint8_t count, std::string* refused) {
  size_t total = 0;
  for (uint8_t i = 0; i < count; ++i) {
    total += backends[i].option_count;
  }
  options_.assign(total, et::BackendOption{});  // never reallocated below: spans stay valid
  size_t used = 0;
  std::string id;
  for (uint8_t i = 0; i < count; ++i) {
    const etb_backend_t& backend = backends[i];
    id.assign(view(backend.id));
    size_t delivered = 0;
    for (uint8_t j = 0; j < backend.option_count; ++j) {
      etb_option_t option = backend.options[j];
      const std::string_view key = view(option.key);
      if (key == kIdSuffixKey && option.type == ETB_TYPE_STRING) {
        id.append(view(option.s));
        continue;
      }
      if (key.substr(0, kDupPrefix.size()) == kDupPrefix && key.size() > kDupPrefix.size()) {
        option.key.ptr += kDupPrefix.size();
        option.key.len = static_cast<uint16_t>(option.key.len - kDupPrefix.size());
      }
      to_runtime_option(option, options_[used + delivered++]);
    }
    const et::Error error =
        map_.set_options(id.c_str(), et::Span<et::BackendOption>(options_.data() + used, delivered));
    if (error != et::Error::Ok) {
      *refused = id;
      return error;
    }
    used += delivered;
  }
  return et::Error::Ok;
}

void OwnedOptionsMap::release() {
  for (et::BackendOption& option : options_) {
    option = et::BackendOption{};
    std::strncpy(option.key, kReleasedKey, sizeof(option.key) - 1);
    std::array<char, et::kMaxOptionValueLength> text{};
    std::strncpy(text.data(), kReleasedValue, text.size() - 1);
    option.value = text;
  }
}

}  // namespace etb
