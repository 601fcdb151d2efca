// SPDX-License-Identifier: BSD-3-Clause
// What one backend's delegates of one model received during one request: kept
// by the probes (probe_backend.h) and by the recorders around real backends
// (recording_backend.h), and turned into report entries by the agent.
#pragma once

#include <executorch/runtime/backend/interface.h>

#include <cstdint>
#include <string>
#include <vector>

namespace etb {

namespace et = executorch::runtime;

struct DeliveryRecord {
  // Bounds on what a record keeps, so no request can grow it without limit.
  static constexpr size_t kMaxRecordedOptions = 64;
  static constexpr size_t kMaxCompileSpecs = 16;

  uint32_t init_calls = 0;
  uint32_t execute_calls = 0;
  uint32_t set_calls = 0;
  uint32_t get_calls = 0;
  // Order of this backend's first hook call among all recorded backends in
  // the request (0: not called).
  uint64_t first_call = 0;
  // init: runtime_specs of the first init; set_option: the options received;
  // get_option (real backends): the options as the backend's call left them.
  std::vector<et::BackendOption> received;
  // init ran again with runtime_specs that differ from the first ones:
  // the first such specs (reported as a second entry, so a check sees them).
  bool specs_diverged = false;
  std::vector<et::BackendOption> diverged;
  // Probes: for each key the first init's runtime_specs hold more than once,
  // what BackendInitContext::get_runtime_spec<T>(key) returned.
  std::vector<et::BackendOption> lookups;
  // Real backends: the compile-spec keys of the first init and their values'
  // sizes in bytes, and the first Error other than Ok the backend's own hooks
  // returned in this request (Ok if none).
  std::vector<std::pair<std::string, size_t>> compile_specs;
  et::Error returned = et::Error::Ok;

  // Forget the previous request; received keeps its memory.
  void clear();
  // Marks the first hook call of the request in the shared clock.
  void note_call();
  // An init with these runtime_specs: the first one's are kept, and the first
  // later ones that differ.
  void note_init_specs(et::Span<const et::BackendOption> specs);
  void note_returned(et::Error error);
};

// The model whose delegates the calling thread's init and execute calls
// belong to until it says otherwise (0 on a fresh thread).
void set_current_model(uint8_t model);
uint8_t current_model();

}  // namespace etb
