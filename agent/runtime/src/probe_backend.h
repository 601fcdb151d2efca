// SPDX-License-Identifier: BSD-3-Clause
// A probe backend: a BackendInterface that records what the runtime hands it.
#pragma once

#include <executorch/runtime/backend/interface.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "delivery_record.h"
#include "etb/wire.h"

namespace etb {

namespace et = executorch::runtime;

// Registered under a name chosen at run time (REGISTER). Each probe keeps what
// it received during the current request, per model of the LOAD, and the
// options set on it through set_option, so reports show exactly what each
// delegate saw and under which name it answers. Every init makes a handle of
// its own that names the model it was loaded in (the model the loading thread
// is working on, etb::set_current_model), so execute counts for the delegate's own
// model however threads interleave. Models load on threads of their own
// (CONCURRENT): the records are guarded by a mutex. The runtime keeps a pointer
// to the probe and to its name for the life of the process, so a registered
// probe is never destroyed.
class ProbeBackend final : public et::BackendInterface {
 public:
  static constexpr size_t kMaxRecordedOptions = DeliveryRecord::kMaxRecordedOptions;
  static constexpr size_t kMaxStateOptions = 1024;

  using Record = DeliveryRecord;

  explicit ProbeBackend(std::string name);

  // The name this probe was registered under; the runtime stores this pointer.
  const char* name() const { return name_.c_str(); }

  // The record of one model (SET and GET count in model 0's). Read it only
  // while no thread is loading or executing.
  const Record& record(uint8_t model = 0) const { return records_[model]; }

  // Forget the previous request's record (set state is kept).
  void begin_request();

  // Forget the record and every option set so far (RESET).
  void reset();

  bool is_available() const override { return true; }
  et::Result<et::DelegateHandle*> init(et::BackendInitContext& context, et::FreeableBuffer* processed,
                                       et::ArrayRef<et::CompileSpec> compile_specs) const override;
  et::Error execute(et::BackendExecutionContext& context, et::DelegateHandle* handle,
                    et::Span<et::EValue*> args) const override;
  void destroy(et::DelegateHandle* handle) const override;
  et::Error set_option(et::BackendOptionContext& context, const et::Span<et::BackendOption>& options) override;
  et::Error get_option(et::BackendOptionContext& context, et::Span<et::BackendOption>& options) override;

 private:
  // One delegate: what init made of it.
  struct Handle {
    uint8_t model;
  };

  // etb.lookup:KEY for each key the first init's specs hold more than once
  // (docs/wire-format.md, "Agent directives").
  static void look_up_repeated_keys(const et::BackendInitContext& context, Record& record);
  // etb.as_TYPE:KEY for each received etb.ask:KEY = "TYPE,..." (docs/agent.md, probes):
  // what get_runtime_spec<TYPE>(KEY) returned.
  static void answer_asks(const et::BackendInitContext& context, Record& record);

  const std::string name_;
  // init and execute are const in BackendInterface; recording is their effect.
  mutable std::mutex mutex_;  // guards records_ and state_
  mutable std::array<Record, ETB_MAX_MODELS> records_;
  std::vector<et::BackendOption> state_;
};

}  // namespace etb
