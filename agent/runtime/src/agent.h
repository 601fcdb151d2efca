// Carries out decoded requests against the real ExecuTorch runtime.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "etb/wire.h"
#include "loaded_program.h"
#include "probe_backend.h"
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

 private:
  void load(const etb_request_t& request, ReportBuilder& report);
  void execute(ReportBuilder& report);
  void set(const etb_request_t& request, ReportBuilder& report);
  void get(const etb_request_t& request, ReportBuilder& report);
  void reset();
  void register_probes(const etb_request_t& request, ReportBuilder& report);
  void hello(ReportBuilder& report);

  ProbeBackend* find_probe(std::string_view name) const;
  // Entries for the probes whose hooks ran in this request, in first-call order.
  void add_probe_entries(ReportBuilder& report, bool with_received) const;

  // Registered probes; the runtime holds pointers to them until the process ends.
  std::vector<std::unique_ptr<ProbeBackend>> probes_;
  std::unique_ptr<LoadedProgram> program_;
};

// Facts every HELLO report carries.
void add_device_facts(ReportBuilder& report);

}  // namespace etb
