#include "owned_options_map.h"

#include <algorithm>
#include <cstring>

#include "runtime_options.h"

namespace etb {

et::Error OwnedOptionsMap::build(const etb_backend_t* backends, uint8_t count, std::string* refused) {
  size_t total = 0;
  for (uint8_t i = 0; i < count; ++i) {
    total += backends[i].option_count;
  }
  options_.assign(total, et::BackendOption{});  // never reallocated below: spans stay valid
  size_t used = 0;
  for (uint8_t i = 0; i < count; ++i) {
    const etb_backend_t& backend = backends[i];
    for (uint8_t j = 0; j < backend.option_count; ++j) {
      to_runtime_option(backend.options[j], options_[used + j]);
    }
    char id[ETB_MAX_ID + 1];
    const size_t len = std::min<size_t>(backend.id.len, ETB_MAX_ID);
    std::memcpy(id, backend.id.ptr, len);
    id[len] = '\0';
    const et::Error error =
        map_.set_options(id, et::Span<et::BackendOption>(options_.data() + used, backend.option_count));
    if (error != et::Error::Ok) {
      *refused = id;
      return error;
    }
    used += backend.option_count;
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
