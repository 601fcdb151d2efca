// SPDX-License-Identifier: BSD-3-Clause
/* standin_method.cpp - STAND-IN for Method's delegate dispatch (see mcu_method.h). */
#include "mcu_method.h"

#include <stdint.h>

namespace mcu {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::BackendOption;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::get_backend_class;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::Span;

namespace {

constexpr size_t kRuntimePoolBytes = 256;

struct Delegate {
  BackendInterface* backend;
  DelegateHandle* handle;
};

/* One model: the delegates its load initialised, in program order. */
struct Model {
  Delegate delegates[ETB_MAX_DELEGATES];
  size_t initialized;
  bool loaded;
};

Model models[MCU_MAX_MODELS];

void unload(Model& model) {
  for (size_t i = 0; i < model.initialized; i++) {
    model.delegates[i].backend->destroy(model.delegates[i].handle);
  }
  model.initialized = 0;
  model.loaded = false;
}

}  // namespace

Error model_load(const ModelLoad& load) {
  /* Method::init's runtime allocator; the probes ask nothing of it. */
  alignas(16) static uint8_t runtime_pool[kRuntimePoolBytes];
  MemoryAllocator allocator(sizeof runtime_pool, runtime_pool);
  Model& model = models[load.model];
  unload(model);
  if (load.keep || load.delegate_count > ETB_MAX_DELEGATES) {
    return Error::InvalidArgument; /* the agent refuses KEEP before (no program to keep) */
  }
  for (size_t i = 0; i < load.delegate_count; i++) {
    BackendInterface* backend = get_backend_class(load.delegate_ids[i]);
    if (backend == nullptr || !backend->is_available()) {
      unload(model);
      return Error::NotFound;
    }
    Span<const BackendOption> specs =
        load.map != nullptr ? load.map->get_options(load.delegate_ids[i]) : Span<const BackendOption>();
    BackendInitContext context(&allocator, nullptr, load.method, nullptr, specs);
    FreeableBuffer processed(nullptr, 0, nullptr); /* no delegate blob: nothing was compiled */
    auto handle = backend->init(context, &processed, ArrayRef<CompileSpec>());
    if (!handle.ok()) {
      unload(model);
      return handle.error();
    }
    model.delegates[i] = Delegate{backend, handle.get()};
    model.initialized = i + 1u;
  }
  model.loaded = true;
  return Error::Ok;
}

Error model_execute(size_t index) {
  Model& model = models[index];
  if (!model.loaded) {
    return Error::InvalidState;
  }
  for (size_t i = 0; i < model.initialized; i++) {
    BackendExecutionContext context;
    Error error = model.delegates[i].backend->execute(context, model.delegates[i].handle, Span<EValue*>());
    if (error != Error::Ok) {
      return error;
    }
  }
  return Error::Ok;
}

bool model_has_method(size_t model) { return models[model].loaded; }

bool model_has_program(size_t model) { return models[model].loaded; }

const char* model_program(size_t model) {
  (void)model;
  return "";
}

void models_unload() {
  for (Model& model : models) {
    unload(model);
  }
}

const char* model_failure() { return nullptr; }

}  // namespace mcu
