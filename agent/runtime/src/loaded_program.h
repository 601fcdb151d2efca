// SPDX-License-Identifier: BSD-3-Clause
// A program loaded from a file through Program::load, and the methods loaded
// from it through Program::load_method, with everything they need kept alive.
#pragma once

#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "method_io.h"
#include "owned_options_map.h"
#include "step_result.h"

namespace etb {

// open -> delegate_ids -> load_method -> execute (repeatable), for any number
// of methods. Never moved once created; destroying it destroys the methods
// first, then their memory and maps, the program and the loader.
class LoadedProgram {
 public:
  // The memory-planned bytes one method may ask for (programs are untrusted).
  static constexpr size_t kMaxPlannedBytes = size_t{256} << 20;

  LoadedProgram() = default;
  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;

  // Opens the file and runs Program::load; *open_us is the time both took.
  StepResult open(const std::string& path, int64_t* open_us);

  // The delegate ids of a method, in program order.
  StepResult delegate_ids(const std::string& method, std::vector<std::string>* out) const;

  // Loads a method with the given map, which this object keeps alive and
  // unchanged as long as the method (the runtime may keep its spans).
  StepResult load_method(const std::string& method, std::unique_ptr<OwnedOptionsMap> map, int64_t* load_us);

  // Executes a loaded method once, its inputs set as MethodInputs makes them
  // (given beside the program, or seeded; probe programs have none).
  StepResult execute(const std::string& method, int64_t* execute_us);

  // A method's outputs after its last execute, as describe_outputs describes
  // them; none when it has none (or is not loaded).
  OutputFacts outputs(const std::string& method) const;

  bool has_method(const std::string& method) const { return methods_.count(method) != 0; }

 private:
  // One loaded method and what it points into.
  struct LoadedMethod {
    std::string name;
    std::unique_ptr<OwnedOptionsMap> map;
    std::unique_ptr<MethodInputs> inputs;
    std::vector<std::vector<uint8_t>> planned_buffers;
    std::vector<et::Span<uint8_t>> planned_spans;
    std::optional<et::HierarchicalAllocator> planned_memory;
    std::optional<et::MemoryManager> memory_manager;
    std::optional<et::Method> method;
  };

  StepResult open_file(const std::string& path);
  StepResult set_inputs(LoadedMethod& loaded);
  std::string path_;  // the program file (its inputs file is beside it)
  std::unique_ptr<executorch::extension::FileDataLoader> loader_;
  std::optional<et::Program> program_;
  executorch::extension::MallocMemoryAllocator method_allocator_;
  executorch::extension::MallocMemoryAllocator temp_allocator_;
  // Declared last: destroyed first.
  std::map<std::string, std::unique_ptr<LoadedMethod>> methods_;
};

// "0x23": an Error code as reports print it.
std::string error_code(et::Error error);

}  // namespace etb
