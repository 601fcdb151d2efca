// Carries out decoded requests against the real ExecuTorch runtime.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "etb/wire.h"
#include "loaded_module.h"
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
  // The path-specific part of a LOAD: loads request.load.method of the
  // program at path through the request's path, then executes it once.
  StepResult load_program(const etb_request_t& request, const std::string& path, const std::string& method,
      ReportBuilder& report);
  StepResult load_module(const etb_request_t& request, const std::string& path, const std::string& method,
      ReportBuilder& report);
  // Checks the method's delegate ids against the request's delegates.
  StepResult check_delegates(const std::vector<std::string>& actual, const etb_request_t& request,
      const std::string& path) const;
  void execute(ReportBuilder& report);
  void set(const etb_request_t& request, ReportBuilder& report);
  void get(const etb_request_t& request, ReportBuilder& report);
  void reset();
  void register_probes(const etb_request_t& request, ReportBuilder& report);
  void hello(ReportBuilder& report);

  ProbeBackend* find_probe(std::string_view name) const;
  // Entries for the probes whose hooks ran in this request, in first-call order.
  void add_probe_entries(ReportBuilder& report, bool with_received) const;
  // LOAD: one entry per registered real (non-probe) backend among the
  // program's delegates, status = init_status.
  void add_real_backend_entries(const std::vector<std::string>& delegates, et::Error init_status,
      ReportBuilder& report) const;
  // Fact "outputs": the method's float outputs after execute, if it has any.
  static void add_output_fact(const std::string& outputs, ReportBuilder& report);

  // Registered probes; the runtime holds pointers to them until the process ends.
  std::vector<std::unique_ptr<ProbeBackend>> probes_;
  // What the last LOAD left loaded: a program (path program) or a module
  // (the module paths), never both; and the method EXECUTE runs.
  std::unique_ptr<LoadedProgram> program_;
  std::unique_ptr<LoadedModule> module_;
  std::string method_;

  // Reused from request to request, so that serving one allocates little:
  // The runtime options of one backend of a SET or GET.
  std::vector<et::BackendOption> call_options_;
  // The delegate ids of the program being loaded.
  std::vector<std::string> delegate_ids_;
  // The probes whose hooks ran, for add_probe_entries.
  mutable std::vector<const ProbeBackend*> called_;
};

// Facts every HELLO report carries.
void add_device_facts(ReportBuilder& report);

}  // namespace etb
