// SPDX-License-Identifier: BSD-3-Clause
#include "probe_backend.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "runtime_options.h"

namespace etb {

ProbeBackend::ProbeBackend(std::string name) : name_(std::move(name)) {}

void ProbeBackend::begin_request() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Record& record : records_) {
    record.clear();
  }
}

void ProbeBackend::reset() {
  begin_request();
  std::lock_guard<std::mutex> lock(mutex_);
  state_.clear();
}

et::Result<et::DelegateHandle*> ProbeBackend::init(et::BackendInitContext& context, et::FreeableBuffer* processed,
                                                   et::ArrayRef<et::CompileSpec> compile_specs) const {
  const et::Span<const et::BackendOption> specs = context.runtime_specs();
  auto* handle = new (std::nothrow) Handle{current_model()};
  if (handle == nullptr) {
    return et::Error::MemoryAllocationFailed;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Record& record = records_[handle->model];
    record.note_call();
    record.note_init_specs(specs);
    if (record.init_calls == 0) {
      look_up_repeated_keys(context, record);
      answer_asks(context, record);
    }
    ++record.init_calls;
  }
  if (processed != nullptr) {
    processed->Free();
  }
  return reinterpret_cast<et::DelegateHandle*>(handle);
}

void ProbeBackend::destroy(et::DelegateHandle* handle) const { delete reinterpret_cast<Handle*>(handle); }

namespace {

constexpr std::string_view kAsk = "etb.ask:";

enum class SpecType { kBool, kInt, kString };

SpecType type_of(const et::BackendOption& option) {
  if (std::holds_alternative<bool>(option.value)) return SpecType::kBool;
  if (std::holds_alternative<int>(option.value)) return SpecType::kInt;
  return SpecType::kString;
}

// What get_runtime_spec<T>(key) returned, as an option to report: the value under
// "PREFIX:KEY", or the Error as an int under "PREFIX_error:KEY"; the label is cut to a
// key's 63 bytes, at a UTF-8 character boundary.
et::BackendOption looked_up(const et::BackendInitContext& context, const char* key, SpecType type,
                            const std::string& prefix) {
  et::BackendOption found{};
  et::Error error = et::Error::Ok;
  if (type == SpecType::kBool) {
    auto value = context.get_runtime_spec<bool>(key);
    error = value.ok() ? et::Error::Ok : value.error();
    if (value.ok()) found.value = *value;
  } else if (type == SpecType::kInt) {
    auto value = context.get_runtime_spec<int>(key);
    error = value.ok() ? et::Error::Ok : value.error();
    if (value.ok()) found.value = *value;
  } else {
    auto value = context.get_runtime_spec<const char*>(key);
    error = value.ok() ? et::Error::Ok : value.error();
    if (value.ok()) {
      auto& text = found.value.emplace<std::array<char, et::kMaxOptionValueLength>>();
      const size_t length = strnlen(*value, text.size() - 1);
      std::memcpy(text.data(), *value, length);
      text[length] = '\0';
    }
  }
  if (error != et::Error::Ok) {
    found.value = static_cast<int>(error);
  }
  std::string label = prefix + (error == et::Error::Ok ? ":" : "_error:") + key;
  if (label.size() > sizeof(found.key) - 1) {
    size_t end = sizeof(found.key) - 1;
    while (end > 0 && (static_cast<unsigned char>(label[end]) & 0xC0) == 0x80) {
      --end;
    }
    label.resize(end);
  }
  std::memcpy(found.key, label.data(), label.size());
  return found;
}

}  // namespace

void ProbeBackend::look_up_repeated_keys(const et::BackendInitContext& context, Record& record) {
  const std::vector<et::BackendOption>& specs = record.received;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string_view key = option_key(specs[i]);
    size_t last = i;
    bool earlier = false;
    for (size_t j = 0; j < specs.size(); ++j) {
      if (option_key(specs[j]) == key) {
        earlier = earlier || j < i;
        last = j;
      }
    }
    if (earlier || last == i || record.lookups.size() + 1 > kMaxRecordedOptions) {
      continue;  // not repeated, or looked up at its first occurrence already
    }
    record.lookups.push_back(looked_up(context, specs[i].key, type_of(specs[last]), "etb.lookup"));
  }
}

void ProbeBackend::answer_asks(const et::BackendInitContext& context, Record& record) {
  const size_t received = record.received.size();
  for (size_t i = 0; i < received; ++i) {
    const std::string_view key = option_key(record.received[i]);
    const auto* types = std::get_if<std::array<char, et::kMaxOptionValueLength>>(&record.received[i].value);
    if (key.substr(0, kAsk.size()) != kAsk || types == nullptr) {
      continue;
    }
    const std::string asked(key.substr(kAsk.size()));
    std::string_view list = option_string(*types);
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view name = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      SpecType type;
      if (name == "bool") {
        type = SpecType::kBool;
      } else if (name == "int") {
        type = SpecType::kInt;
      } else if (name == "string") {
        type = SpecType::kString;
      } else {
        continue;  // not a type get_runtime_spec takes
      }
      if (record.lookups.size() + 1 > kMaxRecordedOptions) {
        return;
      }
      record.lookups.push_back(looked_up(context, asked.c_str(), type, "etb.as_" + std::string(name)));
    }
  }
}

et::Error ProbeBackend::execute(et::BackendExecutionContext& context, et::DelegateHandle* handle,
                                et::Span<et::EValue*> args) const {
  const uint8_t model = handle != nullptr ? reinterpret_cast<const Handle*>(handle)->model : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  Record& record = records_[model];
  record.note_call();
  ++record.execute_calls;
  return et::Error::Ok;
}

et::Error ProbeBackend::set_option(et::BackendOptionContext& context, const et::Span<et::BackendOption>& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  Record& record = records_[0];
  record.note_call();
  ++record.set_calls;
  for (const et::BackendOption& option : options) {
    if (record.received.size() < kMaxRecordedOptions) {
      record.received.push_back(option);
    }
    bool replaced = false;
    for (et::BackendOption& held : state_) {
      if (option_key(held) == option_key(option)) {
        held.value = option.value;
        replaced = true;
        break;
      }
    }
    if (!replaced) {
      if (state_.size() >= kMaxStateOptions) {
        return et::Error::MemoryAllocationFailed;
      }
      state_.push_back(option);
    }
  }
  return et::Error::Ok;
}

et::Error ProbeBackend::get_option(et::BackendOptionContext& context, et::Span<et::BackendOption>& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  Record& record = records_[0];
  record.note_call();
  ++record.get_calls;
  // Like real backends: fill the keys this probe knows, leave the others as they are.
  for (et::BackendOption& wanted : options) {
    for (const et::BackendOption& held : state_) {
      if (option_key(held) == option_key(wanted)) {
        wanted.value = held.value;
        break;
      }
    }
  }
  return et::Error::Ok;
}

}  // namespace etb
