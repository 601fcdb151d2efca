// SPDX-License-Identifier: BSD-3-Clause
#include "recording_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

namespace etb {

namespace {

#ifndef ETB_RUNTIME_FROM_SOURCE
using RegisterFn = et::Error (*)(const et::Backend&);

// The mangled name of executorch::runtime::register_backend(Backend const&).
constexpr const char* kRegisterSymbol = "_ZN10executorch7runtime16register_backendERKNS0_7BackendE";

RegisterFn runtime_register() {
  static const RegisterFn fn = reinterpret_cast<RegisterFn>(::dlsym(RTLD_NEXT, kRegisterSymbol));
  if (fn == nullptr) {
    std::fprintf(stderr,
                 "et-agent: the runtime's register_backend is not found (%s): link libexecutorch "
                 "as a shared library after the agent\n",
                 ::dlerror());
    std::abort();
  }
  return fn;
}
#endif

// Zero-initialised storage (no constructor runs before the backends register).
alignas(RecordingBackend) unsigned char g_storage[RecordingBackend::kCapacity][sizeof(RecordingBackend)];
std::atomic<size_t> g_count{0};
std::atomic<bool> g_recording{true};

}  // namespace

size_t recorder_count() { return g_count.load(std::memory_order_acquire); }

RecordingBackend& recorder_at(size_t index) {
  return *std::launder(reinterpret_cast<RecordingBackend*>(g_storage[index]));
}

RecordingBackend* find_recorder(std::string_view name) {
  for (size_t i = 0; i < recorder_count(); ++i) {
    if (name == recorder_at(i).name()) {
      return &recorder_at(i);
    }
  }
  return nullptr;
}

et::Error register_unrecorded(const et::Backend& backend) {
#ifdef ETB_RUNTIME_FROM_SOURCE
  return et::register_backend(backend);  // linked in: no real backend to record
#else
  return runtime_register()(backend);
#endif
}

void RecordingBackend::set_recording(bool on) { g_recording.store(on, std::memory_order_relaxed); }

bool RecordingBackend::recording() { return g_recording.load(std::memory_order_relaxed); }

void RecordingBackend::begin_request() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (DeliveryRecord& record : records_) {
    if (record.first_call != 0) {  // every hook marks its record: the others are clean
      record.clear();
    }
  }
}

bool RecordingBackend::is_available() const { return real_->is_available(); }

et::Result<et::DelegateHandle*> RecordingBackend::init(et::BackendInitContext& context, et::FreeableBuffer* processed,
                                                       et::ArrayRef<et::CompileSpec> compile_specs) const {
  if (!recording()) {
    return real_->init(context, processed, compile_specs);
  }
  // The specs and compile specs are const and the runtime's: read after the call,
  // under one lock, what the backend was handed.
  const uint8_t model = current_model();
  et::Result<et::DelegateHandle*> handle = real_->init(context, processed, compile_specs);
  std::lock_guard<std::mutex> lock(mutex_);
  DeliveryRecord& record = records_[model];
  record.note_call();
  record.note_init_specs(context.runtime_specs());
  if (record.init_calls == 0) {
    const size_t kept = std::min(compile_specs.size(), DeliveryRecord::kMaxCompileSpecs);
    for (size_t i = 0; i < kept; ++i) {
      const char* key = compile_specs[i].key;
      record.compile_specs.emplace_back(key != nullptr ? key : "", compile_specs[i].value.nbytes);
    }
  }
  ++record.init_calls;
  record.note_returned(handle.ok() ? et::Error::Ok : handle.error());
  return handle;
}

et::Error RecordingBackend::execute(et::BackendExecutionContext& context, et::DelegateHandle* handle,
                                    et::Span<et::EValue*> args) const {
  if (!recording()) {
    return real_->execute(context, handle, args);
  }
  const uint8_t model = current_model();
  const et::Error error = real_->execute(context, handle, args);
  std::lock_guard<std::mutex> lock(mutex_);
  DeliveryRecord& record = records_[model];
  record.note_call();
  ++record.execute_calls;
  record.note_returned(error);
  return error;
}

void RecordingBackend::destroy(et::DelegateHandle* handle) const { real_->destroy(handle); }

et::Error RecordingBackend::set_option(et::BackendOptionContext& context, const et::Span<et::BackendOption>& options) {
  if (!recording()) {
    return real_->set_option(context, options);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    DeliveryRecord& record = records_[0];
    record.note_call();
    ++record.set_calls;
    for (const et::BackendOption& option : options) {
      if (record.received.size() < DeliveryRecord::kMaxRecordedOptions) {
        record.received.push_back(option);
      }
    }
  }
  const et::Error error = real_->set_option(context, options);
  std::lock_guard<std::mutex> lock(mutex_);
  records_[0].note_returned(error);
  return error;
}

et::Error RecordingBackend::get_option(et::BackendOptionContext& context, et::Span<et::BackendOption>& options) {
  if (!recording()) {
    return real_->get_option(context, options);
  }
  const et::Error error = real_->get_option(context, options);
  std::lock_guard<std::mutex> lock(mutex_);
  DeliveryRecord& record = records_[0];
  record.note_call();
  ++record.get_calls;
  for (const et::BackendOption& option : options) {
    if (record.received.size() < DeliveryRecord::kMaxRecordedOptions) {
      record.received.push_back(option);  // as the backend's call left it
    }
  }
  record.note_returned(error);
  return error;
}

}  // namespace etb

#ifndef ETB_RUNTIME_FROM_SOURCE
// The definition the backend libraries' static initializers reach (exported
// from the executable, see CMakeLists.txt): each real backend goes into the
// runtime's registry behind a recorder, under its own name.
executorch::runtime::Error executorch::runtime::register_backend(const executorch::runtime::Backend& backend) {
  using etb::RecordingBackend;
  const size_t index = etb::g_count.load(std::memory_order_relaxed);
  if (backend.backend == nullptr || index >= RecordingBackend::kCapacity) {
    return etb::register_unrecorded(backend);  // the runtime answers as it would
  }
  auto* recorder = new (etb::g_storage[index]) RecordingBackend(backend.name, backend.backend);
  const Error error = etb::register_unrecorded(Backend{backend.name, recorder});
  if (error != Error::Ok) {
    recorder->~RecordingBackend();  // refused (a duplicate name, say): nothing refers to it
    return error;
  }
  etb::g_count.store(index + 1, std::memory_order_release);
  return error;
}
#endif  // ETB_RUNTIME_FROM_SOURCE
