// SPDX-License-Identifier: BSD-3-Clause
// What the agent feeds a method and reads back from it, the same on every load
// path: each input a float tensor of ones (the XNNPACK program's x), the float
// tensor outputs as text.
#pragma once

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/executor/method_meta.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "step_result.h"

namespace etb {

namespace et = executorch::runtime;

// The inputs of one method, made once from its MethodMeta and kept alive as
// long as this object (the values point into it). Probe programs have none.
class MethodInputs {
 public:
  // The elements one input tensor may have (a program is untrusted).
  static constexpr size_t kMaxInputElements = size_t{64} << 20;

  MethodInputs() = default;
  MethodInputs(const MethodInputs&) = delete;
  MethodInputs& operator=(const MethodInputs&) = delete;

  // Builds one value per input, in input order. An input that is not a float
  // tensor is refused (NotSupported): the agent only feeds float tensors.
  StepResult prepare(const et::MethodMeta& meta);

  const std::vector<et::EValue>& values() const { return values_; }

 private:
  struct Tensor {
    std::vector<executorch::aten::SizesType> sizes;
    std::vector<executorch::aten::DimOrderType> dim_order;
    std::vector<executorch::aten::StridesType> strides;
    std::vector<float> data;
    std::optional<executorch::aten::TensorImpl> impl;
  };
  std::vector<std::unique_ptr<Tensor>> tensors_;
  std::vector<et::EValue> values_;
};

// The float tensor outputs among values, as text: each output's elements
// printed %g and joined by ",", outputs joined by ";"; "" when there are none.
std::string float_outputs(const et::EValue* values, size_t count);

}  // namespace etb
