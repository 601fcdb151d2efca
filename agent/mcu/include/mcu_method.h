/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_method.h - the models of a LOAD (wire-format.md, LOAD "models"): up to
 * MCU_MAX_MODELS program instances, each loaded, executed and unloaded here.
 *
 * Built from an ExecuTorch source tree (real/program_method.cpp), a model is a
 * Program loaded from a held program (mcu_program.h) with up to
 * MCU_METHODS_PER_MODEL of its methods loaded through Program::load_method; KEEP
 * loads another method into the model's program. With the stand-in
 * (standin_method.cpp) a model's program is its delegate list, one method
 * (forward): for each delegate it does what Method::init does (get_backend_class,
 * is_available, a BackendInitContext whose runtime_specs are map->get_options(id),
 * init; destroy on failure), and execute calls each delegate's execute in order.
 */
#ifndef MCU_METHOD_H
#define MCU_METHOD_H

#include <stddef.h>

#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/interface.h>

#include "etb/wire.h"

#define MCU_MAX_MODELS ETB_MAX_MODELS
#define MCU_METHODS_PER_MODEL 2u

namespace mcu {

using executorch::runtime::Error;
using executorch::runtime::LoadBackendOptionsMap;

/* One model of a LOAD, as the agent hands it over. */
struct ModelLoad {
  size_t model;                    /* 0..MCU_MAX_MODELS-1 */
  etb_str_t program;               /* a held program's name (empty: the one held last) */
  const char* method;              /* NUL-terminated; "forward" by default */
  const char* const* delegate_ids; /* NUL-terminated, at most ETB_MAX_DELEGATES */
  size_t delegate_count;
  const LoadBackendOptionsMap* map;
  bool keep; /* load into the program this model holds (KEEP) */
};

/* Loads the method; on success it is what model_execute runs. A failed load leaves
   the model's methods loaded before as they were. */
Error model_load(const ModelLoad& load);
/* Executes the model's current method; InvalidState when it has none. */
Error model_execute(size_t model);
/* Whether the model has a method to execute / a program loaded (KEEP needs one). */
bool model_has_method(size_t model);
bool model_has_program(size_t model);
/* The name of the model's program ("" with the stand-in or none loaded). */
const char* model_program(size_t model);
/* Destroys every model's methods (their delegates), then their programs. */
void models_unload();
/* Why the last model_load failed, for the report; nullptr: the runtime's error says it. */
const char* model_failure();

}  // namespace mcu

#endif /* MCU_METHOD_H */
