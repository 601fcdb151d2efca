/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcu_probe.h - probe backends: real BackendInterface implementations that
 * record what the runtime hands them, so a report shows exactly what each
 * backend received.
 *
 * A probe is registered under a name chosen at run time (REGISTER) and keeps
 * its own copy of that name, which it reports. Its init reads its options as a
 * real backend's init does: BackendInitContext::runtime_specs() for the keys and
 * get_runtime_spec<bool|int|const char*>(key) for each value. Per request it
 * records how often each hook ran, the order of its first call among all
 * probes, and the options it received (the first init's, or what set_option
 * got) as views into the runtime's BackendOptions, one record per model of a
 * LOAD (probes_set_model names the model the runtime is working on; SET and GET
 * use model 0's). For each key its init's runtime_specs hold more than once it
 * also records what get_runtime_spec<T>(key) finds (`etb.lookup:KEY`, or
 * `etb.lookup_error:KEY` with the Error; T the type of the key's last copy),
 * as docs/wire-format.md "Agent directives" asks. Across requests it keeps the
 * options set on it (get_option reads them back) until probes_reset().
 */
#ifndef MCU_PROBE_H
#define MCU_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include <executorch/runtime/backend/interface.h>

#include "etb/wire.h"
#include "mcu_method.h"

namespace mcu {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::BackendOption;
using executorch::runtime::BackendOptionContext;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::Span;

struct ProbeRecord {
  uint16_t init_calls;
  uint16_t execute_calls;
  uint16_t set_calls;
  uint16_t get_calls;
  uint32_t first_call; /* order of the first hook call in this request; 0: not called */
  const etb_option_t* received;
  uint8_t received_count;
  uint8_t spec_count;  /* of received: the first init's runtime_specs (then the lookups) */
  bool specs_diverged; /* a later init got runtime_specs different from the first */
};

class Probe final : public BackendInterface {
 public:
  explicit Probe(etb_str_t name);

  bool is_available() const override;
  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> compile_specs) const override;
  Error execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const override;
  Error set_option(BackendOptionContext& context, const Span<BackendOption>& backend_options) override;
  Error get_option(BackendOptionContext& context, Span<BackendOption>& backend_options) override;
  void destroy(DelegateHandle* handle) const override;

  /* The name it was registered under, NUL-terminated (the registry keeps this pointer). */
  const char* name() const { return name_; }
  etb_str_t name_view() const;
  /* What it recorded for a model of this request (SET and GET: model 0). */
  const ProbeRecord& record(size_t model = 0) const { return records_[model]; }
  void forget_record();

 private:
  ProbeRecord& current() const;
  void note_call() const;

  char name_[ETB_MAX_ID + 1u];
  mutable ProbeRecord records_[MCU_MAX_MODELS];
};

/* A new probe named `name` (copied), or nullptr if none is free. */
Probe* probe_create(etb_str_t name);

/* Returns a probe the registry refused to the pool. */
void probe_release(Probe* probe);

/* The probe behind a registered backend, or nullptr if it is not a probe. */
Probe* probe_of(BackendInterface* backend);

/* Forgets every probe's record of the previous request; model 0 is current. */
void probes_begin_request();

/* The model whose load or execute the runtime is working on (its records). */
void probes_set_model(size_t model);

/* Forgets records and every option set on any probe (RESET). */
void probes_reset();

/* The probes called for `model` in this request, in the order of their first call for it;
   returns the count. */
size_t probes_called(size_t model, const Probe** out, size_t cap);

}  // namespace mcu

#endif /* MCU_PROBE_H */
