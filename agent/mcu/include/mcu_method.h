/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_method.h - STAND-IN for the part of Program::load_method / Method that
 * dispatches to delegates (runtime/executor/method.cpp is not in the wheel).
 *
 * The program is the request's list of delegate ids (an MCU has no .pte file).
 * load() does for each delegate, in program order, what Method::init does: look
 * the id up with get_backend_class (NotFound when absent or not available),
 * build a BackendInitContext whose runtime_specs are map->get_options(id) (the
 * real LoadBackendOptionsMap: an empty span when it has no entry; entries naming
 * no delegate are never asked for), and call BackendInterface::init. The first
 * failing init ends the load with its error after destroying the delegates
 * initialised before it. execute() calls each delegate's execute in order.
 */
#ifndef MCU_METHOD_H
#define MCU_METHOD_H

#include <stddef.h>

#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/interface.h>

#include "etb/wire.h"

namespace mcu {

using executorch::runtime::BackendInterface;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::LoadBackendOptionsMap;

class DelegateMethod {
 public:
  /* delegate_ids: NUL-terminated, at most ETB_MAX_DELEGATES of them. */
  Error load(const char *const *delegate_ids, size_t count, const LoadBackendOptionsMap *map);
  /* InvalidState when nothing is loaded. */
  Error execute();
  /* Destroys the delegates of a loaded method; an unloaded method is left as is. */
  void unload();
  bool loaded() const { return loaded_; }

 private:
  struct Delegate {
    BackendInterface *backend;
    DelegateHandle *handle;
  };
  Delegate delegates_[ETB_MAX_DELEGATES] = {};
  size_t initialized_ = 0;
  bool loaded_ = false;
};

}  // namespace mcu

#endif /* MCU_METHOD_H */
