// A program loaded from a file and its method "forward", with everything the
// method needs kept alive beside it.
#pragma once

#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace etb {

namespace et = executorch::runtime;

// What a failed step returns: the runtime's Error and a sentence for the report.
struct StepResult {
  et::Error error = et::Error::Ok;
  std::string message;

  bool ok() const { return error == et::Error::Ok; }
};

// One LOAD: open -> check_delegates -> load_method -> execute (repeatable).
// Never moved once created; destroying it destroys the method first, then
// its memory, the program and the loader.
class LoadedProgram {
 public:
  static constexpr const char* kMethodName = "forward";

  LoadedProgram() = default;
  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;

  // Opens the file and runs Program::load; *open_us is the time both took.
  StepResult open(const std::string& path, int64_t* open_us);

  // The delegate ids of the method, in program order.
  StepResult delegate_ids(std::vector<std::string>* out) const;

  // Loads the method with the given map. The caller keeps the arrays the
  // map's spans point to alive, unchanged, as long as this object.
  StepResult load_method(const et::LoadBackendOptionsMap& map, int64_t* load_us);

  // Executes the method once. A program with tensor inputs (the XNNPACK
  // program) gets every input set to a float tensor of ones before each
  // execute (other input types are refused); probe programs have no inputs.
  StepResult execute(int64_t* execute_us);

  // The method's float tensor outputs after the last execute, as text: the
  // elements of each output joined by ",", outputs joined by ";" (%g), or ""
  // when the method has none.
  std::string float_outputs() const;

  bool has_method() const { return method_.has_value(); }

 private:
  StepResult open_file(const std::string& path);
  StepResult set_inputs();
  std::unique_ptr<executorch::extension::FileDataLoader> loader_;
  std::optional<et::Program> program_;
  executorch::extension::MallocMemoryAllocator method_allocator_;
  executorch::extension::MallocMemoryAllocator temp_allocator_;
  std::vector<std::vector<uint8_t>> planned_buffers_;
  std::vector<et::Span<uint8_t>> planned_spans_;
  std::optional<et::HierarchicalAllocator> planned_memory_;
  std::optional<et::MemoryManager> memory_manager_;
  std::optional<et::Method> method_;

  // An input the agent owns and hands to Method::set_input.
  struct InputTensor {
    size_t index = 0;
    std::vector<executorch::aten::SizesType> sizes;
    std::vector<executorch::aten::DimOrderType> dim_order;
    std::vector<executorch::aten::StridesType> strides;
    std::vector<float> data;
    std::optional<executorch::aten::TensorImpl> impl;
  };
  std::vector<InputTensor> inputs_;
};

}  // namespace etb
