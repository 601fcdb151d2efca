// A probe backend: a BackendInterface that records what the runtime hands it.
#pragma once

#include <executorch/runtime/backend/interface.h>

#include <cstdint>
#include <string>
#include <vector>

namespace etb {

namespace et = executorch::runtime;

// Registered under a name chosen at run time (REGISTER). Each probe keeps what
// it received during the current request, and the options set on it through
// set_option, so reports show exactly what each backend saw and under which
// name it answers. The runtime keeps a pointer to the probe and to its name
// for the life of the process, so a registered probe is never destroyed.
class ProbeBackend final : public et::BackendInterface {
 public:
  // Bounds on what a probe keeps, so no request can grow it without limit.
  static constexpr size_t kMaxRecordedOptions = 64;
  static constexpr size_t kMaxStateOptions = 1024;

  // What the probe received during one request.
  struct Record {
    uint32_t init_calls = 0;
    uint32_t execute_calls = 0;
    uint32_t set_calls = 0;
    uint32_t get_calls = 0;
    // Order of this probe's first hook call among all probes in the request
    // (0: not called).
    uint64_t first_call = 0;
    // init: runtime_specs of the first init; set_option: the options received.
    std::vector<et::BackendOption> received;
    // init ran again with runtime_specs that differ from the first ones:
    // the first such specs (reported as a second entry, so a check sees them).
    bool specs_diverged = false;
    std::vector<et::BackendOption> diverged;
    // For each key the first init's runtime_specs hold more than once: what
    // BackendInitContext::get_runtime_spec<T>(key) returned, T the type of the
    // key's last occurrence, as "etb.lookup:KEY" = the value found or
    // "etb.lookup_error:KEY" = the Error code (int).
    std::vector<et::BackendOption> lookups;
  };

  explicit ProbeBackend(std::string name);

  // The name this probe was registered under; the runtime stores this pointer.
  const char* name() const { return name_.c_str(); }

  const Record& record() const { return record_; }

  // Forget the previous request's record (set state is kept).
  void begin_request();

  // Forget the record and every option set so far (RESET).
  void reset();

  bool is_available() const override { return true; }
  et::Result<et::DelegateHandle*> init(
      et::BackendInitContext& context,
      et::FreeableBuffer* processed,
      et::ArrayRef<et::CompileSpec> compile_specs) const override;
  et::Error execute(
      et::BackendExecutionContext& context,
      et::DelegateHandle* handle,
      et::Span<et::EValue*> args) const override;
  et::Error set_option(
      et::BackendOptionContext& context,
      const et::Span<et::BackendOption>& options) override;
  et::Error get_option(
      et::BackendOptionContext& context,
      et::Span<et::BackendOption>& options) override;

 private:
  void note_call() const;
  void look_up_repeated_keys(const et::BackendInitContext& context) const;

  const std::string name_;
  // init and execute are const in BackendInterface; recording is their effect.
  mutable Record record_;
  std::vector<et::BackendOption> state_;
};

}  // namespace etb
