// SPDX-License-Identifier: BSD-3-Clause
// One program instance of a LOAD (a "model", wire-format.md LOAD): its own
// Program or Module, its own maps, loaded through its own load path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "etb/wire.h"
#include "loaded_module.h"
#include "loaded_program.h"
#include "step_result.h"

namespace etb {

// The wire name of a load path (ETB_LOAD_*): "program", "module", ...
const char* path_label(uint8_t path);

// The fields of one model of a LOAD request, wherever the wire put them
// (model 0: the request's own fields; model k: request.models[k - 1]).
struct ModelRequest {
  etb_str_t program{};
  uint8_t delegate_count = 0;
  const etb_str_t* delegates = nullptr;
  uint8_t backend_count = 0;
  const etb_backend_t* backends = nullptr;
  const etb_load_t* load = nullptr;

  static ModelRequest of(const etb_request_t& request, uint8_t model);
};

// Loads and executes one model. Touches nothing shared but the runtime, so
// instances of one LOAD may load on threads of their own; what the report
// needs is kept here until the agent writes it.
class ModelInstance {
 public:
  ModelInstance() = default;
  ModelInstance(const ModelInstance&) = delete;
  ModelInstance& operator=(const ModelInstance&) = delete;

  // Loads the model's method through its path and executes it once. keep:
  // load into the program or module this instance already holds (KEEP).
  StepResult load(const ModelRequest& request, bool keep);

  // Executes the loaded method again (EXECUTE).
  StepResult execute();

  // Destroys the methods, then the program or module.
  void clear();

  bool has_method() const;
  // The delegate ids of the method last loaded (empty before its program was read).
  const std::vector<std::string>& delegate_ids() const { return delegate_ids_; }
  // The method's outputs after its last execute (none if it has none).
  OutputFacts outputs() const;
  const std::string& method() const { return method_; }

  // Times of the last load (-1: that step did not run), clamped to int32.
  int32_t program_load_us = -1;
  int32_t load_us = -1;
  int32_t execute_us = -1;

 private:
  StepResult load_program(const ModelRequest& request, const std::string& path);
  StepResult load_module(const ModelRequest& request, const std::string& path);
  StepResult check_delegates(const ModelRequest& request, const std::string& path) const;
  StepResult run_once();

  // A program (path program) or a module (the module paths), never both.
  std::unique_ptr<LoadedProgram> program_;
  std::unique_ptr<LoadedModule> module_;
  std::string loaded_path_;  // the file program_ or module_ was loaded from (KEEP must name it)
  std::string method_;       // the method loaded (EXECUTE runs it)
  std::string loading_;      // the method being loaded
  std::vector<std::string> delegate_ids_;
};

}  // namespace etb
