// SPDX-License-Identifier: BSD-3-Clause
// What the agent feeds a method and reads back from it, the same on every load
// path: each input a tensor of seeded values (docs/agent.md, "Inputs"), every
// output described as report facts (docs/wire-format.md, "Outputs").
#pragma once

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/executor/method_meta.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "step_result.h"

namespace etb {

namespace et = executorch::runtime;

// The inputs of one method, made once from its MethodMeta and kept alive as
// long as this object (the values point into it). Probe programs have none.
// A program file P with a file P.inputs beside it that names the method gives
// that method its inputs (docs/agent.md, "Given inputs"); others are seeded.
class MethodInputs {
 public:
  // The elements one input tensor may have (a program is untrusted).
  static constexpr size_t kMaxInputElements = size_t{64} << 20;

  MethodInputs() = default;
  MethodInputs(const MethodInputs&) = delete;
  MethodInputs& operator=(const MethodInputs&) = delete;

  // The bytes an inputs file may take.
  static constexpr size_t kMaxInputsFileBytes = size_t{64} << 20;

  // The inputs of method `method` of the program file `program`: those of
  // `program`.inputs when that file exists and names the method (refused with
  // InvalidArgument where it does not fit the method), else one seeded value
  // per input, in input order, each element input_value(i, j). A seeded input
  // that is not a tensor of a dtype input_value fills is refused (NotSupported).
  StepResult prepare(const et::MethodMeta& meta, const std::string& program, const std::string& method);

  const std::vector<et::EValue>& values() const { return values_; }

  // What an execute's outputs are against the expected ones the inputs file
  // gives: "" when it gives none, "ok" when each agrees within its tolerance
  // (floats: |got - expected| <= atol + rtol * |expected|, NaN with NaN, an
  // infinity with the same one; others exactly), else where the first does not.
  std::string check(const et::EValue* values, size_t count) const;

  // An expected output: compared only when `compared` (a tensor).
  struct Expected {
    bool compared = false;
    executorch::aten::ScalarType type = executorch::aten::ScalarType::Float;
    std::vector<int32_t> sizes;
    std::vector<uint8_t> bytes;
  };

 private:
  struct Tensor {
    std::vector<executorch::aten::SizesType> sizes;
    std::vector<executorch::aten::DimOrderType> dim_order;
    std::vector<executorch::aten::StridesType> strides;
    std::vector<uint64_t> data;  // 8-byte aligned storage for any element type
    std::optional<executorch::aten::TensorImpl> impl;
  };
  // A zeroed tensor of `type` shaped `sizes` (dim order from `meta_dim_order`),
  // added as the next value; nullptr (with *error set) past kMaxInputElements.
  Tensor* add_tensor(executorch::aten::ScalarType type, std::vector<executorch::aten::SizesType> sizes,
                     et::Span<const executorch::aten::DimOrderType> dim_order, size_t index, StepResult* error);
  StepResult seeded(const et::MethodMeta& meta);
  // The inputs an inputs file holds (given_inputs.cpp); *named false when the
  // file names another method.
  StepResult given(const et::MethodMeta& meta, const std::vector<uint8_t>& file, const std::string& method,
                   const std::string& source, bool* named);

  std::vector<std::unique_ptr<Tensor>> tensors_;
  std::vector<et::EValue> values_;
  bool checks_ = false;  // the inputs file gives expected outputs
  std::vector<Expected> expected_;
  double rtol_ = 0;
  double atol_ = 0;
};

// The seeded draw of element `element` of input `input` (docs/agent.md, "Inputs").
uint64_t input_draw(uint64_t input, uint64_t element);

// What the report says of a method's outputs after an execute
// (docs/wire-format.md, "Outputs"): how many there are (fact "output_count"),
// and the text facts (key, value), in order: "expected" (given inputs only), "outputs" (the float tensors'
// elements as text, a preview), then per tensor output K "output:K" and its
// element chunks "output:K.J".
struct OutputFacts {
  size_t count = 0;
  std::vector<std::pair<std::string, std::string>> texts;
};
// With `inputs` that give expected outputs, the first text fact is "expected":
// MethodInputs::check's verdict.
OutputFacts describe_outputs(const et::EValue* values, size_t count, const MethodInputs* inputs = nullptr);

}  // namespace etb
