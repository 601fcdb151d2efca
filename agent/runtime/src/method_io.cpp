// SPDX-License-Identifier: BSD-3-Clause
#include "method_io.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "etb/wire.h"

namespace etb {

namespace {

using executorch::aten::ScalarType;

// Outputs described one by one (facts "output:K"), the bytes an output's
// elements may take to travel, and the element facts one report may carry:
// with the other LOAD facts they stay within the wire's 32 (wire-format.md, "Outputs").
constexpr size_t kDescribedOutputs = 8;
constexpr size_t kMaxElementBytes = 480;
constexpr size_t kChunkBytes = 120;
constexpr size_t kMaxChunks = 12;

// The short dtype names of docs/wire-format.md ("Outputs"); nullptr: not described.
const char* dtype_name(ScalarType type) {
  switch (type) {
    case ScalarType::Float:
      return "f32";
    case ScalarType::Double:
      return "f64";
    case ScalarType::Half:
      return "f16";
    case ScalarType::BFloat16:
      return "bf16";
    case ScalarType::Long:
      return "i64";
    case ScalarType::Int:
      return "i32";
    case ScalarType::Short:
      return "i16";
    case ScalarType::Char:
      return "i8";
    case ScalarType::Byte:
      return "u8";
    case ScalarType::Bool:
      return "bool";
    default:
      return nullptr;
  }
}

bool is_float(ScalarType type) {
  return type == ScalarType::Float || type == ScalarType::Double || type == ScalarType::Half ||
         type == ScalarType::BFloat16;
}

double half_to_double(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1F) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) {
    return sign * std::ldexp(mantissa, -24);
  }
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

// Element `i` of a float-typed tensor's bytes, as a double.
double float_element(const uint8_t* bytes, size_t i, ScalarType type) {
  switch (type) {
    case ScalarType::Float: {
      float value;
      std::memcpy(&value, bytes + 4 * i, 4);
      return value;
    }
    case ScalarType::Double: {
      double value;
      std::memcpy(&value, bytes + 8 * i, 8);
      return value;
    }
    case ScalarType::Half: {
      uint16_t bits;
      std::memcpy(&bits, bytes + 2 * i, 2);
      return half_to_double(bits);
    }
    default: {  // BFloat16: the upper half of a float
      uint16_t bits;
      std::memcpy(&bits, bytes + 2 * i, 2);
      const uint32_t wide = uint32_t{bits} << 16;
      float value;
      std::memcpy(&value, &wide, 4);
      return value;
    }
  }
}

// Element `i` of an integer- or bool-typed tensor's bytes.
int64_t int_element(const uint8_t* bytes, size_t i, ScalarType type) {
  switch (type) {
    case ScalarType::Long: {
      int64_t value;
      std::memcpy(&value, bytes + 8 * i, 8);
      return value;
    }
    case ScalarType::Int: {
      int32_t value;
      std::memcpy(&value, bytes + 4 * i, 4);
      return value;
    }
    case ScalarType::Short: {
      int16_t value;
      std::memcpy(&value, bytes + 2 * i, 2);
      return value;
    }
    case ScalarType::Char:
      return static_cast<int8_t>(bytes[i]);
    default:
      return bytes[i];  // Byte, Bool
  }
}

// FNV-1a, 64 bits, over the bytes.
uint64_t fnv1a64(const uint8_t* bytes, size_t size) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (size_t i = 0; i < size; ++i) {
    hash = (hash ^ bytes[i]) * 0x100000001B3ULL;
  }
  return hash;
}

std::string hex_bytes(const uint8_t* bytes, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    text += kDigits[bytes[i] >> 4];
    text += kDigits[bytes[i] & 0xF];
  }
  return text;
}

// "DTYPE [SHAPE] DIGEST NON_FINITE LOW HIGH": the summary fact of one output.
std::string summary(const executorch::aten::Tensor& tensor, const char* dtype) {
  const ScalarType type = tensor.scalar_type();
  const auto* bytes = static_cast<const uint8_t*>(tensor.const_data_ptr());
  const size_t numel = static_cast<size_t>(tensor.numel());
  std::string text = std::string(dtype) + " [";
  for (ssize_t d = 0; d < tensor.dim(); ++d) {
    text += (d ? "," : "") + std::to_string(tensor.size(d));
  }
  char digest[17];
  snprintf(digest, sizeof(digest), "%016" PRIx64, fnv1a64(bytes, tensor.nbytes()));
  text += "] " + std::string(digest);
  size_t non_finite = 0;
  char low[32] = "-";
  char high[32] = "-";
  if (is_float(type)) {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (size_t i = 0; i < numel; ++i) {
      const double value = float_element(bytes, i, type);
      if (!std::isfinite(value)) {
        ++non_finite;
        continue;
      }
      lo = std::fmin(lo, value);
      hi = std::fmax(hi, value);
    }
    if (non_finite < numel) {
      snprintf(low, sizeof(low), "%.17g", lo);
      snprintf(high, sizeof(high), "%.17g", hi);
    }
  } else if (numel > 0) {
    int64_t lo = std::numeric_limits<int64_t>::max();
    int64_t hi = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < numel; ++i) {
      const int64_t value = int_element(bytes, i, type);
      lo = value < lo ? value : lo;
      hi = value > hi ? value : hi;
    }
    snprintf(low, sizeof(low), "%" PRId64, lo);
    snprintf(high, sizeof(high), "%" PRId64, hi);
  }
  return text + " " + std::to_string(non_finite) + " " + low + " " + high;
}

// The float tensors' elements printed %g, joined by ","; outputs joined by ";".
std::string float_preview(const et::EValue* values, size_t count) {
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    if (!values[i].isTensor() || values[i].toTensor().scalar_type() != ScalarType::Float) {
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

// The value element `element` of input `input` takes in a tensor of `type`
// (docs/agent.md, "Inputs"), written at `out`.
void write_input(ScalarType type, uint64_t input, uint64_t element, uint8_t* out) {
  const uint64_t draw = input_draw(input, element);
  const uint64_t kind = draw % 8;
  const uint64_t more = draw >> 8;
  const int64_t large = ((more & 1) ? -1 : 1) * static_cast<int64_t>(512 + (more >> 1) % 512);
  const double real = kind == 0   ? 0.0
                      : kind == 1 ? static_cast<double>(large)
                                  : static_cast<double>(static_cast<int64_t>(more % 513) - 256) / 64.0;
  const int64_t integer = kind == 0 ? 0 : kind == 1 ? large : static_cast<int64_t>(more % 201) - 100;
  switch (type) {
    case ScalarType::Float: {
      const float value = static_cast<float>(real);
      std::memcpy(out, &value, 4);
      return;
    }
    case ScalarType::Double:
      std::memcpy(out, &real, 8);
      return;
    case ScalarType::Long:
      std::memcpy(out, &integer, 8);
      return;
    case ScalarType::Int: {
      const auto value = static_cast<int32_t>(integer);
      std::memcpy(out, &value, 4);
      return;
    }
    case ScalarType::Short: {
      const auto value = static_cast<int16_t>(integer);
      std::memcpy(out, &value, 2);
      return;
    }
    case ScalarType::Char:
      *out = static_cast<uint8_t>(kind == 0 ? 0 : static_cast<int>(more % 256) - 128);
      return;
    case ScalarType::Byte:
      *out = static_cast<uint8_t>(kind == 0 ? 0 : more % 256);
      return;
    default:
      *out = static_cast<uint8_t>(more & 1);
      return;  // Bool
  }
}

bool fed(ScalarType type) {
  return type == ScalarType::Float || type == ScalarType::Double || type == ScalarType::Long ||
         type == ScalarType::Int || type == ScalarType::Short || type == ScalarType::Char || type == ScalarType::Byte ||
         type == ScalarType::Bool;
}

}  // namespace

uint64_t input_draw(uint64_t input, uint64_t element) {
  uint64_t z = (input << 32) + element + 0x9E3779B97F4A7C15ULL;  // splitmix64's output step
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

StepResult MethodInputs::prepare(const et::MethodMeta& meta, const std::string& program, const std::string& method) {
  tensors_.clear();
  values_.clear();
  expected_.clear();
  checks_ = false;
  const std::string source = program + ".inputs";
  std::FILE* file = std::fopen(source.c_str(), "rb");
  if (file == nullptr) {
    return seeded(meta);
  }
  const long end = std::fseek(file, 0, SEEK_END) == 0 ? std::ftell(file) : -1;
  std::vector<uint8_t> bytes(end > 0 && static_cast<size_t>(end) <= kMaxInputsFileBytes ? end : 0);
  const bool read = end >= 0 && static_cast<size_t>(end) <= kMaxInputsFileBytes && std::fseek(file, 0, SEEK_SET) == 0 &&
                    std::fread(bytes.data(), 1, bytes.size(), file) == bytes.size();
  std::fclose(file);
  if (!read) {
    return StepResult{et::Error::InvalidArgument, "inputs file " + source + " cannot be read whole within " +
                                                      std::to_string(kMaxInputsFileBytes) + " bytes"};
  }
  bool named = false;
  const StepResult result = given(meta, bytes, method, source, &named);
  if (!result.ok()) {
    tensors_.clear();
    values_.clear();
    expected_.clear();
    checks_ = false;
    return result;
  }
  return named ? result : seeded(meta);
}

MethodInputs::Tensor* MethodInputs::add_tensor(ScalarType type, std::vector<executorch::aten::SizesType> sizes,
                                               et::Span<const executorch::aten::DimOrderType> dim_order, size_t index,
                                               StepResult* error) {
  auto tensor = std::make_unique<Tensor>();
  tensor->sizes = std::move(sizes);
  tensor->dim_order.assign(dim_order.begin(), dim_order.end());
  tensor->strides.assign(tensor->sizes.size(), 1);
  size_t numel = 1;
  for (size_t d = tensor->sizes.size(); d-- > 0;) {
    tensor->strides[d] = static_cast<executorch::aten::StridesType>(numel);
    const auto size = tensor->sizes[d];
    if (size < 0 || (size > 0 && numel > kMaxInputElements / static_cast<size_t>(size))) {
      *error = StepResult{et::Error::MemoryAllocationFailed, "input " + std::to_string(index) + " has more than " +
                                                                 std::to_string(kMaxInputElements) +
                                                                 " elements, the agent's bound"};
      return nullptr;
    }
    numel *= static_cast<size_t>(size);
  }
  const size_t width = executorch::runtime::elementSize(type);
  tensor->data.assign((numel * width + 7) / 8, 0);
  auto* bytes = reinterpret_cast<uint8_t*>(tensor->data.data());
  tensor->impl.emplace(type, static_cast<ssize_t>(tensor->sizes.size()), tensor->sizes.data(), bytes,
                       tensor->dim_order.data(), tensor->strides.data());
  values_.emplace_back(executorch::aten::Tensor(&*tensor->impl));
  tensors_.push_back(std::move(tensor));
  return tensors_.back().get();
}

StepResult MethodInputs::seeded(const et::MethodMeta& meta) {
  for (size_t i = 0; i < meta.num_inputs(); ++i) {
    auto tag = meta.input_tag(i);
    auto info = meta.input_tensor_meta(i);
    if (!tag.ok() || *tag != et::Tag::Tensor || !info.ok() || !fed(info->scalar_type())) {
      return StepResult{et::Error::NotSupported,
                        "input " + std::to_string(i) +
                            " is not a tensor the agent fills: it feeds float, double, integer and bool tensors"};
    }
    const ScalarType type = info->scalar_type();
    StepResult error;
    Tensor* tensor = add_tensor(type, {info->sizes().begin(), info->sizes().end()}, info->dim_order(), i, &error);
    if (tensor == nullptr) {
      return error;
    }
    const size_t width = executorch::runtime::elementSize(type);
    auto* bytes = reinterpret_cast<uint8_t*>(tensor->data.data());
    const size_t numel = static_cast<size_t>(tensor->impl->numel());
    for (size_t j = 0; j < numel; ++j) {
      write_input(type, i, j, bytes + j * width);
    }
  }
  return {};
}

namespace {

// An element as the report prints it: %.9g for floats, decimal for the others.
std::string element_text(const uint8_t* bytes, size_t i, ScalarType type) {
  char text[32];
  if (is_float(type)) {
    snprintf(text, sizeof(text), "%.9g", float_element(bytes, i, type));
  } else {
    snprintf(text, sizeof(text), "%" PRId64, int_element(bytes, i, type));
  }
  return text;
}

bool agrees_within(double got, double want, double rtol, double atol) {
  if (std::isnan(got) || std::isnan(want)) {
    return std::isnan(got) && std::isnan(want);
  }
  if (std::isinf(got) || std::isinf(want)) {
    return got == want;
  }
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

std::string form(ScalarType type, const std::vector<int32_t>& sizes) {
  std::string text = std::string(dtype_name(type) ? dtype_name(type) : "?") + " [";
  for (size_t d = 0; d < sizes.size(); ++d) {
    text += (d ? "," : "") + std::to_string(sizes[d]);
  }
  return text + "]";
}

}  // namespace

std::string MethodInputs::check(const et::EValue* values, size_t count) const {
  if (!checks_) {
    return "";
  }
  for (size_t k = 0; k < expected_.size(); ++k) {
    const Expected& want = expected_[k];
    const std::string at = "output " + std::to_string(k);
    if (!want.compared) {
      continue;
    }
    if (k >= count || !values[k].isTensor()) {
      return at + ": expected " + form(want.type, want.sizes) + ", the method gave no tensor";
    }
    const executorch::aten::Tensor tensor = values[k].toTensor();
    std::vector<int32_t> sizes(tensor.sizes().begin(), tensor.sizes().end());
    if (tensor.scalar_type() != want.type || sizes != want.sizes) {
      return at + ": expected " + form(want.type, want.sizes) + ", got " + form(tensor.scalar_type(), sizes);
    }
    const auto* got = static_cast<const uint8_t*>(tensor.const_data_ptr());
    const ScalarType type = want.type;
    for (size_t i = 0; i < static_cast<size_t>(tensor.numel()); ++i) {
      const bool agrees = is_float(type) ? agrees_within(float_element(got, i, type),
                                                         float_element(want.bytes.data(), i, type), rtol_, atol_)
                                         : int_element(got, i, type) == int_element(want.bytes.data(), i, type);
      if (!agrees) {
        return at + " element " + std::to_string(i) + ": expected " + element_text(want.bytes.data(), i, type) +
               ", got " + element_text(got, i, type);
      }
    }
  }
  return "ok";
}

OutputFacts describe_outputs(const et::EValue* values, size_t count, const MethodInputs* inputs) {
  OutputFacts facts;
  facts.count = count;
  const std::string verdict = inputs != nullptr ? inputs->check(values, count) : std::string();
  if (!verdict.empty()) {
    facts.texts.emplace_back("expected", verdict.substr(0, ETB_MAX_STRING));
  }
  const std::string preview = float_preview(values, count);
  if (!preview.empty()) {
    facts.texts.emplace_back("outputs", preview.substr(0, ETB_MAX_STRING));
  }
  size_t chunks = 0;
  for (size_t k = 0; k < count && k < kDescribedOutputs; ++k) {
    if (!values[k].isTensor()) {
      continue;
    }
    const executorch::aten::Tensor tensor = values[k].toTensor();
    const char* dtype = dtype_name(tensor.scalar_type());
    if (dtype == nullptr) {
      continue;
    }
    const std::string key = "output:" + std::to_string(k);
    facts.texts.emplace_back(key, summary(tensor, dtype));
    const size_t size = tensor.nbytes();
    const size_t needed = (size + kChunkBytes - 1) / kChunkBytes;
    if (size > kMaxElementBytes || chunks + needed > kMaxChunks) {
      continue;
    }
    const auto* bytes = static_cast<const uint8_t*>(tensor.const_data_ptr());
    for (size_t j = 0; j < needed; ++j) {
      const size_t start = j * kChunkBytes;
      facts.texts.emplace_back(key + "." + std::to_string(j),
                               hex_bytes(bytes + start, std::min(kChunkBytes, size - start)));
    }
    chunks += needed;
  }
  return facts;
}

}  // namespace etb
