// SPDX-License-Identifier: BSD-3-Clause
#include "delivery_record.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "etb/wire.h"
#include "runtime_options.h"

namespace etb {

namespace {

// Orders first calls across all recorded backends and threads. Constant
// initialised: recorders are built before the agent's own static initializers run.
std::atomic<uint64_t> g_call_clock{0};

// The model the calling thread is loading or executing (set_current_model).
thread_local uint8_t t_current_model = 0;

bool same_options(et::Span<const et::BackendOption> a, const std::vector<et::BackendOption>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (option_key(a[i]) != option_key(b[i]) || a[i].value != b[i].value) {
      return false;
    }
  }
  return true;
}

}  // namespace

void set_current_model(uint8_t model) { t_current_model = model < ETB_MAX_MODELS ? model : 0; }

uint8_t current_model() { return t_current_model; }

void DeliveryRecord::clear() {
  std::vector<et::BackendOption> kept = std::move(received);
  kept.clear();
  *this = DeliveryRecord{};
  received = std::move(kept);
}

void DeliveryRecord::note_call() {
  if (first_call == 0) {
    first_call = ++g_call_clock;
  }
}

void DeliveryRecord::note_init_specs(et::Span<const et::BackendOption> specs) {
  const size_t kept = std::min(specs.size(), kMaxRecordedOptions);
  if (init_calls == 0) {
    received.assign(specs.begin(), specs.begin() + kept);
  } else if (!specs_diverged && !same_options(specs, received)) {
    specs_diverged = true;
    diverged.assign(specs.begin(), specs.begin() + kept);
  }
}

void DeliveryRecord::note_returned(et::Error error) {
  if (returned == et::Error::Ok) {
    returned = error;
  }
}

}  // namespace etb
