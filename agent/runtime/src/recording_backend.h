// SPDX-License-Identifier: BSD-3-Clause
// Records for the real backends: every backend the agent did not write is
// registered behind a RecordingBackend that forwards each call to it unchanged
// and keeps, per model, what the call was handed and what the backend returned.
//
// How (docs/agent.md, "Records for real backends"): the agent defines
// executorch::runtime::register_backend and exports it, so the backend
// libraries' static initializers, which call it through the dynamic linker,
// reach this definition first; it registers a recorder under the backend's own
// name (the backend's own name pointer) with the runtime's register_backend,
// found with dlsym(RTLD_NEXT). These initializers run before the agent's own:
// recorders live in storage that needs no constructor of this file.
#pragma once

#include <executorch/runtime/backend/interface.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string_view>

#include "delivery_record.h"
#include "etb/wire.h"

namespace etb {

class RecordingBackend final : public et::BackendInterface {
 public:
  static constexpr size_t kCapacity = 16;  // the runtime's registry holds 16

  RecordingBackend(const char* name, et::BackendInterface* real) : name_(name), real_(real) {}

  // The name the real backend registered itself under (its own pointer).
  const char* name() const { return name_; }
  // What the backend's delegates of one model received (SET and GET: model 0).
  // Read it only while no thread is loading or executing.
  const DeliveryRecord& record(uint8_t model = 0) const { return records_[model]; }
  void begin_request();

  // Records are kept unless the agent was started with --no-records; the
  // recorders then only forward.
  static void set_recording(bool on);
  static bool recording();

  bool is_available() const override;
  et::Result<et::DelegateHandle*> init(et::BackendInitContext& context, et::FreeableBuffer* processed,
                                       et::ArrayRef<et::CompileSpec> compile_specs) const override;
  et::Error execute(et::BackendExecutionContext& context, et::DelegateHandle* handle,
                    et::Span<et::EValue*> args) const override;
  void destroy(et::DelegateHandle* handle) const override;
  et::Error set_option(et::BackendOptionContext& context, const et::Span<et::BackendOption>& options) override;
  et::Error get_option(et::BackendOptionContext& context, et::Span<et::BackendOption>& options) override;

 private:
  const char* const name_;
  et::BackendInterface* const real_;
  // Never held while the real backend runs: concurrent inits stay concurrent.
  mutable std::mutex mutex_;
  mutable std::array<DeliveryRecord, ETB_MAX_MODELS> records_;
};

// The recorders registered so far, in registration order.
size_t recorder_count();
RecordingBackend& recorder_at(size_t index);
RecordingBackend* find_recorder(std::string_view name);

// Registers a backend of the agent's own (a probe) with the runtime directly,
// without a recorder.
et::Error register_unrecorded(const et::Backend& backend);

}  // namespace etb
