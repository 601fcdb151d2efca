// SPDX-License-Identifier: BSD-3-Clause
// The runtime's log: printed as ExecuTorch's own PAL prints it, and the operators
// it names as missing kept for the report of the load that missed them.
#pragma once

#include <string>
#include <vector>

#include "step_result.h"

namespace etb {

// Puts the agent's log function in the runtime's PAL (register_pal), once, before
// runtime_init: every line still goes where the PAL it replaces sent it (stderr),
// and a line naming a missing operator ("Missing operator: [3] aten::relu.out",
// logged by Method::init for each operator no kernel library registered) is also
// kept by the MissingOperators alive on the thread that logged it.
void install_runtime_log();

// While alive, collects the operators the runtime logs as missing on this thread
// (a method loads on the thread that asks for it). Not copyable; nests.
class MissingOperators {
 public:
  MissingOperators();
  ~MissingOperators();
  MissingOperators(const MissingOperators&) = delete;
  MissingOperators& operator=(const MissingOperators&) = delete;

  // A failed step's message with the operators logged as missing appended
  // ("...; missing operators: aten::relu.out, ..."); other steps as they are.
  StepResult named_in(StepResult step) const;

  // Called by the log function (install_runtime_log) for this thread's innermost collector.
  void add(std::string name);

 private:
  std::vector<std::string> names_;
  MissingOperators* outer_;
};

}  // namespace etb
