// SPDX-License-Identifier: BSD-3-Clause
#include "probe_backend.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
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

et::Result<et::DelegateHandle*> ProbeBackend::init(
    et::BackendInitContext& context,
    et::FreeableBuffer* processed,
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
    }
    ++record.init_calls;
  }
  if (processed != nullptr) {
    processed->Free();
  }
  return reinterpret_cast<et::DelegateHandle*>(handle);
}

void ProbeBackend::destroy(et::DelegateHandle* handle) const {
  delete reinterpret_cast<Handle*>(handle);
}

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
    et::BackendOption found{};
    const std::string prefix_ok = "etb.lookup:" + std::string(key);
    const std::string prefix_error = "etb.lookup_error:" + std::string(key);
    const char* name = specs[i].key;
    et::Error error = et::Error::Ok;
    if (std::holds_alternative<bool>(specs[last].value)) {
      auto value = context.get_runtime_spec<bool>(name);
      error = value.ok() ? et::Error::Ok : value.error();
      if (value.ok()) found.value = *value;
    } else if (std::holds_alternative<int>(specs[last].value)) {
      auto value = context.get_runtime_spec<int>(name);
      error = value.ok() ? et::Error::Ok : value.error();
      if (value.ok()) found.value = *value;
    } else {
      auto value = context.get_runtime_spec<const char*>(name);
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
    // The label is cut to a key's 63 bytes, at a UTF-8 character boundary.
    std::string label = error == et::Error::Ok ? prefix_ok : prefix_error;
    if (label.size() > sizeof(found.key) - 1) {
      size_t end = sizeof(found.key) - 1;
      while (end > 0 && (static_cast<unsigned char>(label[end]) & 0xC0) == 0x80) {
        --end;
      }
      label.resize(end);
    }
    std::memcpy(found.key, label.data(), label.size());
    record.lookups.push_back(found);
  }
}

et::Error ProbeBackend::execute(
    et::BackendExecutionContext& context,
    et::DelegateHandle* handle,
    et::Span<et::EValue*> args) const {
  const uint8_t model = handle != nullptr ? reinterpret_cast<const Handle*>(handle)->model : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  Record& record = records_[model];
  record.note_call();
  ++record.execute_calls;
  return et::Error::Ok;
}

et::Error ProbeBackend::set_option(
    et::BackendOptionContext& context,
    const et::Span<et::BackendOption>& options) {
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

et::Error ProbeBackend::get_option(
    et::BackendOptionContext& context,
    et::Span<et::BackendOption>& options) {
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
