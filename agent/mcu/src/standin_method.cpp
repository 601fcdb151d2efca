// SPDX-License-Identifier: BSD-3-Clause
/* standin_method.cpp - STAND-IN for Method's delegate dispatch (see mcu_method.h). */
#include "mcu_method.h"

#include <stdint.h>

namespace mcu {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendOption;
using executorch::runtime::CompileSpec;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::get_backend_class;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::Span;

namespace {

constexpr size_t kRuntimePoolBytes = 256;
constexpr char kMethodName[] = "forward";

}  // namespace

Error DelegateMethod::load(const char *const *delegate_ids, size_t count,
                           const LoadBackendOptionsMap *map) {
  /* Method::init's runtime allocator; the probes ask nothing of it. */
  alignas(16) static uint8_t runtime_pool[kRuntimePoolBytes];
  MemoryAllocator allocator(sizeof runtime_pool, runtime_pool);
  unload();
  if (count > ETB_MAX_DELEGATES) {
    return Error::InvalidArgument;
  }
  for (size_t i = 0; i < count; i++) {
    BackendInterface *backend = get_backend_class(delegate_ids[i]);
    if (backend == nullptr || !backend->is_available()) {
      unload();
      return Error::NotFound;
    }
    Span<const BackendOption> specs =
        map != nullptr ? map->get_options(delegate_ids[i]) : Span<const BackendOption>();
    BackendInitContext context(&allocator, nullptr, kMethodName, nullptr, specs);
    FreeableBuffer processed(nullptr, 0, nullptr); /* no delegate blob: nothing was compiled */
    auto handle = backend->init(context, &processed, ArrayRef<CompileSpec>());
    if (!handle.ok()) {
      unload();
      return handle.error();
    }
    delegates_[i] = Delegate{backend, handle.get()};
    initialized_ = i + 1u;
  }
  loaded_ = true;
  return Error::Ok;
}

Error DelegateMethod::execute() {
  if (!loaded_) {
    return Error::InvalidState;
  }
  for (size_t i = 0; i < initialized_; i++) {
    BackendExecutionContext context;
    Error error = delegates_[i].backend->execute(context, delegates_[i].handle, Span<EValue *>());
    if (error != Error::Ok) {
      return error;
    }
  }
  return Error::Ok;
}

void DelegateMethod::unload() {
  for (size_t i = 0; i < initialized_; i++) {
    delegates_[i].backend->destroy(delegates_[i].handle);
  }
  initialized_ = 0;
  loaded_ = false;
}

}  // namespace mcu
