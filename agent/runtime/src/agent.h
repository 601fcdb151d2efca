// SPDX-License-Identifier: BSD-3-Clause
// Carries out decoded requests against the real ExecuTorch runtime.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "etb/wire.h"
#include "model_instance.h"
#include "probe_backend.h"
#include "recording_backend.h"
#include "report_builder.h"

namespace etb {

// The agent's state across requests: the probes it registered and the
// program it loaded. Each handle() call fills one report.
class Agent {
 public:
  Agent() = default;
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  void handle(const etb_request_t& request, ReportBuilder& report);
  // Whether the last request was a REBOOT the agent answered OK: the caller reboots the
  // board once that report is written (reboot_board()).
  bool reboot_pending() const { return reboot_pending_; }

 private:
  void load(const etb_request_t& request, ReportBuilder& report);
  // Loads models_[k] from model k of the request, each on the calling thread
  // in model order, or (concurrent) each on a thread of its own, all started
  // together; results[k] is what model k's load (and execute) returned.
  void load_models(const etb_request_t& request, bool keep, bool concurrent, std::vector<StepResult>& results);
  // The report's outcome from per-model results: the first failed model's
  // error (named "model k:" when the LOAD has several), the others appended.
  void report_results(const std::vector<StepResult>& results, ReportBuilder& report) const;
  void execute(ReportBuilder& report);
  void set(const etb_request_t& request, ReportBuilder& report);
  void get(const etb_request_t& request, ReportBuilder& report);
  void reset();
  void register_probes(const etb_request_t& request, ReportBuilder& report);
  void hello(ReportBuilder& report);
  void reboot(ReportBuilder& report);

  ProbeBackend* find_probe(std::string_view name) const;
  // Entries for the probes whose hooks ran in this request: per model, in
  // first-call order within the model.
  void add_probe_entries(ReportBuilder& report, bool with_received) const;
  // LOAD: one entry per registered real (non-probe) backend among a model's
  // delegates, status = init_status, with its records; then one per recorded
  // backend whose hooks ran for the model although it is not a delegate.
  void add_real_backend_entries(uint8_t model, const std::vector<std::string>& delegates, et::Error init_status,
                                ReportBuilder& report) const;
  void add_real_backend_entry(uint8_t model, std::string_view id, et::Error init_status, ReportBuilder& report) const;
  // The recorder of a real backend (none for a probe, or with --no-records).
  const RecordingBackend* recorded(std::string_view name) const;
  // The facts describing the method's outputs after execute, if it has any.
  static void add_output_facts(const OutputFacts& outputs, ReportBuilder& report);

  // Registered probes; the runtime holds pointers to them until the process ends.
  std::vector<std::unique_ptr<ProbeBackend>> probes_;
  bool reboot_pending_ = false;
  // What the last LOAD left loaded: one instance per model, in model order.
  std::vector<std::unique_ptr<ModelInstance>> models_;

  // Reused from request to request, so that serving one allocates little:
  // The runtime options of one backend of a SET or GET.
  std::vector<et::BackendOption> call_options_;
  // The probes whose hooks ran, for add_probe_entries.
  mutable std::vector<const ProbeBackend*> called_;
};

// Facts every HELLO report carries.
void add_device_facts(ReportBuilder& report);
// REBOOT is served only where the device's profile asks for it (ET_AGENT_REBOOT=1 in the
// agent's environment: a board of its own, linux-emu) and the agent may reboot (root).
bool serves_reboot();
// Syncs the file systems and reboots the kernel; returns only if that was refused.
void reboot_board();

}  // namespace etb
