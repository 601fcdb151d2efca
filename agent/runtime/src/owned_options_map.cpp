// SPDX-License-Identifier: BSD-3-Clause
#include "owned_options_map.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>

#include "runtime_options.h"

namespace etb {

namespace {

// LOAD directives: keys a request cannot otherwise express. "etb.dup:KEY" is
// delivered as KEY, so a span can hold one key twice; "etb.id_suffix" (string)
// is appended to the backend id given to set_options and not delivered.
constexpr std::string_view kDupPrefix = "etb.dup:";
constexpr std::string_view kIdSuffixKey = "etb.id_suffix";

// Another model's value for an option: the same type, a different value.
void another_models_value(et::BackendOption& option) {
  std::visit(
      [](auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, bool>) {
          value = !value;
        } else if constexpr (std::is_same_v<T, int>) {
          value = value == 0x2A2A2A2A ? 0x15151515 : 0x2A2A2A2A;
        } else {
          static constexpr char kOther[] = "another model's option";
          const bool same = std::strncmp(value.data(), kOther, value.size()) == 0;
          value.fill('\0');
          std::memcpy(value.data(), same ? "yet another model's option" : kOther, same ? 26 : sizeof(kOther) - 1);
        }
      },
      option.value);
}

}  // namespace

et::Error OwnedOptionsMap::build(const etb_backend_t* backends, uint8_t count, std::string* refused) {
  size_t total = 0;
  for (uint8_t i = 0; i < count; ++i) {
    total += backends[i].option_count;
  }
  options_.assign(total, et::BackendOption{});  // never reallocated below: spans stay valid
  entries_.clear();
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
    entries_.push_back(Entry{id, used, delivered});
    used += delivered;
  }
  return et::Error::Ok;
}

void OwnedOptionsMap::release() {
  for (et::BackendOption& option : options_) {
    another_models_value(option);
  }
  map_.~LoadBackendOptionsMap();
  new (&map_) et::LoadBackendOptionsMap();
  for (const Entry& entry : entries_) {  // the ids were accepted before: they are again
    (void)map_.set_options(entry.id.c_str(), et::Span<et::BackendOption>(options_.data() + entry.first, entry.count));
  }
}

}  // namespace etb
