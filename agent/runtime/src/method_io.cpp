// SPDX-License-Identifier: BSD-3-Clause
#include "method_io.h"

#include <cstdio>

namespace etb {

StepResult MethodInputs::prepare(const et::MethodMeta& meta) {
  tensors_.clear();
  values_.clear();
  for (size_t i = 0; i < meta.num_inputs(); ++i) {
    auto tag = meta.input_tag(i);
    auto info = meta.input_tensor_meta(i);
    if (!tag.ok() || *tag != et::Tag::Tensor || !info.ok() ||
        info->scalar_type() != executorch::aten::ScalarType::Float) {
      return StepResult{et::Error::NotSupported,
                        "input " + std::to_string(i) + " is not a float tensor: the agent only feeds float tensors"};
    }
    auto tensor = std::make_unique<Tensor>();
    tensor->sizes.assign(info->sizes().begin(), info->sizes().end());
    tensor->dim_order.assign(info->dim_order().begin(), info->dim_order().end());
    tensor->strides.assign(tensor->sizes.size(), 1);
    size_t numel = 1;
    for (size_t d = tensor->sizes.size(); d-- > 0;) {
      tensor->strides[d] = static_cast<executorch::aten::StridesType>(numel);
      const auto size = tensor->sizes[d];
      if (size < 0 || (size > 0 && numel > kMaxInputElements / static_cast<size_t>(size))) {
        return StepResult{et::Error::MemoryAllocationFailed, "input " + std::to_string(i) + " has more than " +
                                                                 std::to_string(kMaxInputElements) +
                                                                 " elements, the agent's bound"};
      }
      numel *= static_cast<size_t>(size);
    }
    tensor->data.assign(numel, 1.0f);
    tensor->impl.emplace(executorch::aten::ScalarType::Float, static_cast<ssize_t>(tensor->sizes.size()),
                         tensor->sizes.data(), tensor->data.data(), tensor->dim_order.data(), tensor->strides.data());
    values_.emplace_back(executorch::aten::Tensor(&*tensor->impl));
    tensors_.push_back(std::move(tensor));
  }
  return {};
}

std::string float_outputs(const et::EValue* values, size_t count) {
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    if (!values[i].isTensor() || values[i].toTensor().scalar_type() != executorch::aten::ScalarType::Float) {
      continue;
    }
    const executorch::aten::Tensor tensor = values[i].toTensor();
    const float* data = tensor.const_data_ptr<float>();
    if (!text.empty()) {
      text += ";";
    }
    for (ssize_t j = 0; j < tensor.numel(); ++j) {
      char number[32];
      snprintf(number, sizeof(number), j ? ",%g" : "%g", static_cast<double>(data[j]));
      text += number;
    }
  }
  return text;
}

}  // namespace etb
