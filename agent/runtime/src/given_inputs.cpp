// SPDX-License-Identifier: BSD-3-Clause
// The inputs a method is given in an inputs file beside its program (docs/agent.md,
// "Given inputs"): read within bounds, each checked against the method's MethodMeta.
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include <cstring>

#include "method_io.h"

namespace etb {

namespace {

using executorch::aten::ScalarType;

constexpr char kMagic[4] = {'E', 'T', 'B', 'I'};
constexpr uint8_t kTensor = 1, kInt = 2, kDouble = 3, kBool = 4;
constexpr size_t kMaxRank = 16;

// Little-endian reads that never pass the end of the bytes.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  bool take(void* out, size_t size) {
    if (bytes_.size() - at_ < size) {
      return false;
    }
    std::memcpy(out, bytes_.data() + at_, size);
    at_ += size;
    return true;
  }
  const uint8_t* skip(size_t size) {
    if (bytes_.size() - at_ < size) {
      return nullptr;
    }
    at_ += size;
    return bytes_.data() + at_ - size;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::vector<uint8_t>& bytes_;
  size_t at_ = 0;
};

StepResult refused(const std::string& source, const std::string& what) {
  return StepResult{et::Error::InvalidArgument, "inputs file " + source + ": " + what};
}

// The scalar types an expected output may have: those the report describes.
bool described(uint8_t type) {
  return type <= 7 || type == static_cast<uint8_t>(ScalarType::Bool) ||
         type == static_cast<uint8_t>(ScalarType::BFloat16);
}

// The expected outputs after the inputs: a u16 count, each a u8 tag (0 not
// compared, 1 a tensor: scalar type, rank, sizes, byte count, bytes), then the
// f64 rtol and atol.
StepResult read_expected(Reader& reader, const std::string& source, std::vector<MethodInputs::Expected>* out,
                         double* rtol, double* atol) {
  uint16_t count = 0;
  if (!reader.take(&count, 2)) {
    return refused(source, "no count of expected outputs after the inputs");
  }
  out->assign(count, {});
  for (size_t k = 0; k < count; ++k) {
    const std::string at = "expected output " + std::to_string(k) + ": ";
    MethodInputs::Expected& want = (*out)[k];
    uint8_t tag = 0;
    uint8_t type = 0;
    uint8_t rank = 0;
    if (!reader.take(&tag, 1) || tag > kTensor) {
      return refused(source, at + "not a tag 0 or 1 (or cut short)");
    }
    if (tag == 0) {
      continue;
    }
    if (!reader.take(&type, 1) || !reader.take(&rank, 1) || !described(type) || rank > kMaxRank) {
      return refused(source, at + "scalar type " + std::to_string(type) + " rank " + std::to_string(rank) +
                                 ": not one the report describes, or over rank " + std::to_string(kMaxRank));
    }
    want.compared = true;
    want.type = static_cast<ScalarType>(type);
    want.sizes.assign(rank, 0);
    size_t needed = executorch::runtime::elementSize(want.type);
    for (auto& size : want.sizes) {
      if (!reader.take(&size, 4) || size < 0 ||
          (size > 0 && needed > MethodInputs::kMaxInputsFileBytes / static_cast<size_t>(size))) {
        return refused(source, at + "its sizes are cut short, negative or too large");
      }
      needed *= static_cast<size_t>(size);
    }
    uint32_t size = 0;
    const uint8_t* data = reader.take(&size, 4) ? reader.skip(size) : nullptr;
    if (data == nullptr || size != needed) {
      return refused(source, at + std::to_string(size) + " data bytes, its shape takes " + std::to_string(needed) +
                                 " (or they run past the end)");
    }
    want.bytes.assign(data, data + size);
  }
  if (!reader.take(rtol, 8) || !reader.take(atol, 8) || !(*rtol >= 0) || !(*atol >= 0)) {
    return refused(source, "no rtol and atol (two f64, not negative) after the expected outputs");
  }
  return {};
}

bool tag_is(const et::MethodMeta& meta, size_t i, et::Tag tag) {
  auto found = meta.input_tag(i);
  return found.ok() && *found == tag;
}

}  // namespace

StepResult MethodInputs::given(const et::MethodMeta& meta, const std::vector<uint8_t>& file, const std::string& method,
                               const std::string& source, bool* named) {
  Reader reader(file);
  char magic[4];
  uint16_t name_size = 0;
  if (!reader.take(magic, 4) || std::memcmp(magic, kMagic, 4) != 0 || !reader.take(&name_size, 2)) {
    return refused(source, "does not start with ETBI and a method name");
  }
  const uint8_t* name = reader.skip(name_size);
  if (name == nullptr) {
    return refused(source, "the method name runs past the end");
  }
  *named = std::string(reinterpret_cast<const char*>(name), name_size) == method;
  if (!*named) {
    return {};
  }
  uint16_t count = 0;
  if (!reader.take(&count, 2) || count != meta.num_inputs()) {
    return refused(source, "holds " + std::to_string(count) + " inputs, method \"" + method + "\" takes " +
                               std::to_string(meta.num_inputs()));
  }
  for (size_t i = 0; i < count; ++i) {
    const std::string at = "input " + std::to_string(i) + ": ";
    uint8_t tag = 0;
    if (!reader.take(&tag, 1)) {
      return refused(source, at + "cut short");
    }
    if (tag == kInt || tag == kDouble || tag == kBool) {
      const et::Tag wanted = tag == kInt ? et::Tag::Int : tag == kDouble ? et::Tag::Double : et::Tag::Bool;
      int64_t integer = 0;
      double real = 0;
      uint8_t flag = 0;
      const bool read = tag == kInt      ? reader.take(&integer, 8)
                        : tag == kDouble ? reader.take(&real, 8)
                                         : reader.take(&flag, 1);
      if (!read || !tag_is(meta, i, wanted) || flag > 1) {
        return refused(source, at + "a scalar the method does not take there (or cut short)");
      }
      values_.push_back(tag == kInt ? et::EValue(integer) : tag == kDouble ? et::EValue(real) : et::EValue(flag == 1));
      continue;
    }
    auto info = meta.input_tensor_meta(i);
    uint8_t type = 0;
    uint8_t rank = 0;
    if (tag != kTensor || !tag_is(meta, i, et::Tag::Tensor) || !info.ok() || !reader.take(&type, 1) ||
        !reader.take(&rank, 1)) {
      return refused(source, at + "not the tensor the method takes there (or cut short)");
    }
    if (static_cast<ScalarType>(type) != info->scalar_type() || rank != info->sizes().size() || rank > kMaxRank) {
      return refused(source, at + "scalar type " + std::to_string(type) + " rank " + std::to_string(rank) +
                                 ", the method takes scalar type " +
                                 std::to_string(static_cast<int>(info->scalar_type())) + " rank " +
                                 std::to_string(info->sizes().size()));
    }
    std::vector<executorch::aten::SizesType> sizes(rank);
    for (auto& size : sizes) {
      int32_t value = 0;
      if (!reader.take(&value, 4)) {
        return refused(source, at + "its sizes are cut short");
      }
      size = value;
    }
    StepResult error;
    Tensor* tensor = add_tensor(static_cast<ScalarType>(type), std::move(sizes), info->dim_order(), i, &error);
    if (tensor == nullptr) {
      return error;
    }
    uint32_t size = 0;
    const size_t nbytes = tensor->impl->nbytes();
    const uint8_t* data = reader.take(&size, 4) ? reader.skip(size) : nullptr;
    if (data == nullptr || size != nbytes) {
      return refused(source, at + std::to_string(size) + " data bytes, its shape takes " + std::to_string(nbytes) +
                                 " (or they run past the end)");
    }
    if (nbytes != 0) {
      std::memcpy(tensor->data.data(), data, nbytes);
    }
  }
  const StepResult expected = read_expected(reader, source, &expected_, &rtol_, &atol_);
  if (!expected.ok()) {
    return expected;
  }
  if (!reader.done()) {
    return refused(source, "bytes left after the tolerances");
  }
  checks_ = !expected_.empty();
  return {};
}

}  // namespace etb
