/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_load.h - a request's options as the runtime's type, and the LOAD and
 * EXECUTE actions over the models of mcu_method.h.
 *
 * take_request turns every backend list of a request (a LOAD's further models'
 * too) into BackendOption arrays. On a LOAD it applies the agent directives of
 * docs/wire-format.md: `etb.dup:KEY` is delivered as KEY, `etb.id_suffix`
 * (string) is appended to the backend's id before set_options and not delivered.
 * A LOAD loads each model in model order (no threads: CONCURRENT is
 * UNSUPPORTED), each with its own LoadBackendOptionsMap, executes it once and
 * reports per model (entry field `model`), following "LOAD and EXECUTE in
 * detail" of docs/wire-format.md; KEEP loads another method into model 0's
 * program.
 */
#ifndef MCU_LOAD_H
#define MCU_LOAD_H

#include <stddef.h>

#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/span.h>

#include "etb/wire.h"

namespace mcu {

/* False (the report holds the CAPACITY refusal) if a backend has more options than fit. */
bool take_request(const etb_request_t& request);

/* Backend k of the request's own list (SET, GET, REGISTER), as BackendOptions and its id. */
executorch::runtime::Span<executorch::runtime::BackendOption> request_options(size_t k);
const char* request_id(size_t k);

void do_load(const etb_request_t& request);
void do_execute();
/* RESET: every model unloaded. */
void loads_reset();

}  // namespace mcu

#endif /* MCU_LOAD_H */
