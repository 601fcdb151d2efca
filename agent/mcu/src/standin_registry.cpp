// SPDX-License-Identifier: BSD-3-Clause
/*
 * standin_registry.cpp - STAND-IN for the backend registry of
 * runtime/backend/interface.cpp, which the wheel ships only compiled for
 * Linux. It defines the functions interface.h declares, with the 1.5 runtime's
 * semantics: 16 slots in registration order; a full table gives Internal
 * (checked first), a duplicate name InvalidArgument; no unregister;
 * set_option/get_option of an unknown name NotFound, else the backend's own
 * answer. The registry keeps the name pointer, as the runtime does.
 */
#include <string.h>

#include <executorch/runtime/backend/interface.h>

namespace executorch {
namespace runtime {

namespace {

constexpr size_t kMaxRegisteredBackends = 16;

Backend table[kMaxRegisteredBackends];
size_t table_size;

}  // namespace

BackendInterface::~BackendInterface() {}

BackendInterface* get_backend_class(const char* name) {
  for (size_t i = 0; i < table_size; i++) {
    if (strcmp(table[i].name, name) == 0) {
      return table[i].backend;
    }
  }
  return nullptr;
}

Error register_backend(const Backend& backend) {
  if (table_size >= kMaxRegisteredBackends) {
    return Error::Internal;
  }
  if (get_backend_class(backend.name) != nullptr) {
    return Error::InvalidArgument;
  }
  table[table_size++] = backend;
  return Error::Ok;
}

size_t get_num_registered_backends() { return table_size; }

Result<const char*> get_backend_name(size_t index) {
  if (index >= table_size) {
    return Error::InvalidArgument;
  }
  return table[index].name;
}

Error set_option(const char* backend_name, const Span<BackendOption> backend_options) {
  BackendInterface* backend = get_backend_class(backend_name);
  if (backend == nullptr) {
    return Error::NotFound;
  }
  BackendOptionContext context;
  return backend->set_option(context, backend_options);
}

Error get_option(const char* backend_name, Span<BackendOption> backend_options) {
  BackendInterface* backend = get_backend_class(backend_name);
  if (backend == nullptr) {
    return Error::NotFound;
  }
  BackendOptionContext context;
  return backend->get_option(context, backend_options);
}

}  // namespace runtime
}  // namespace executorch
