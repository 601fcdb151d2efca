// SPDX-License-Identifier: BSD-3-Clause
/*
 * program_method.cpp - DelegateMethod (mcu_method.h) over ExecuTorch's own
 * Program and Method, compiled from the source tree.
 *
 * load() runs Program::load on a BufferDataLoader over the uploaded program
 * (mcu_program.h), checks that the forward method's delegate table names the
 * request's delegates in order (InvalidProgram otherwise, as the hosted agents
 * do), and calls Program::load_method("forward", &memory_manager, nullptr,
 * nullptr, map): Method::init looks each delegate's backend up in the runtime's
 * registry and calls its init with map->get_options(id) as runtime_specs.
 * execute() is Method::execute. Program, Method and all three allocators live in
 * static storage: nothing is allocated (et_pal_allocate answers nullptr).
 */
#include "mcu_method.h"

#include <new>
#include <string.h>
#include <utility>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include "mcu_program.h"

#ifndef MCU_METHOD_ARENA_BYTES
#define MCU_METHOD_ARENA_BYTES 2048u
#endif
#ifndef MCU_PLANNED_ARENA_BYTES
#define MCU_PLANNED_ARENA_BYTES 1024u
#endif
#ifndef MCU_TEMP_ARENA_BYTES
#define MCU_TEMP_ARENA_BYTES 256u
#endif

namespace mcu {

using executorch::extension::BufferDataLoader;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;

namespace {

constexpr char kMethodName[] = "forward";
constexpr size_t kMaxPlannedBuffers = 4;

alignas(16) uint8_t method_arena[MCU_METHOD_ARENA_BYTES];
alignas(16) uint8_t planned_arena[MCU_PLANNED_ARENA_BYTES];
alignas(16) uint8_t temp_arena[MCU_TEMP_ARENA_BYTES];

/* Objects built at each load in static storage (no static constructors, no heap). */
template <typename T>
struct Slot {
  alignas(T) uint8_t bytes[sizeof(T)];
  T *object;

  template <typename... Args>
  T *make(Args &&...args) {
    object = new (bytes) T(std::forward<Args>(args)...);
    return object;
  }
  void drop() {
    if (object != nullptr) {
      object->~T();
      object = nullptr;
    }
  }
};

Slot<BufferDataLoader> loader;
Slot<Program> program;
Slot<MemoryAllocator> method_allocator;
Slot<MemoryAllocator> temp_allocator;
Slot<HierarchicalAllocator> planned;
Slot<MemoryManager> memory_manager;
Slot<Method> runtime_method;
Span<uint8_t> planned_spans[kMaxPlannedBuffers];

MethodMemory memory = {MCU_METHOD_ARENA_BYTES, 0, MCU_PLANNED_ARENA_BYTES, 0,
                       MCU_TEMP_ARENA_BYTES,   0};
const char *failure;

Error fail(Error error, const char *why) {
  failure = why;
  return error;
}

bool delegates_match(const MethodMeta &meta, const char *const *delegate_ids, size_t count) {
  if (meta.num_backends() != count) {
    return false;
  }
  for (size_t i = 0; i < count; i++) {
    Result<const char *> name = meta.get_backend_name(i);
    if (!name.ok() || strcmp(name.get(), delegate_ids[i]) != 0) {
      return false;
    }
  }
  return true;
}

/* The method's memory-planned buffers, carved from the planned arena; false if they do not fit. */
bool plan_memory(const MethodMeta &meta) {
  size_t n = meta.num_memory_planned_buffers();
  size_t used = 0;
  if (n > kMaxPlannedBuffers) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    Result<int64_t> size = meta.memory_planned_buffer_size(i);
    if (!size.ok() || size.get() < 0 ||
        static_cast<uint64_t>(size.get()) > MCU_PLANNED_ARENA_BYTES - used) {
      return false;
    }
    planned_spans[i] = Span<uint8_t>(&planned_arena[used], static_cast<size_t>(size.get()));
    used += static_cast<size_t>(size.get());
  }
  memory.planned_bytes = used;
  planned.make(Span<Span<uint8_t>>(planned_spans, n));
  return true;
}

}  // namespace

const MethodMemory &method_memory() { return memory; }

const char *method_failure() { return failure; }

Error DelegateMethod::load(const char *const *delegate_ids, size_t count,
                           const LoadBackendOptionsMap *map) {
  unload();
  failure = nullptr;
  const uint8_t *bytes = program_bytes();
  if (bytes == nullptr) {
    return fail(Error::InvalidState,
                "no program held: upload one with PROGRAM_DATA and PROGRAM_END (actions 9, 10)");
  }
  loader.make(bytes, program_size());
  Result<Program> parsed = Program::load(loader.object, Program::Verification::InternalConsistency);
  if (!parsed.ok()) {
    return fail(parsed.error(), "Program::load refused the uploaded program");
  }
  program.make(std::move(parsed.get()));
  Result<MethodMeta> meta = program.object->method_meta(kMethodName);
  if (!meta.ok()) {
    return fail(meta.error(), "the uploaded program has no method forward");
  }
  if (!delegates_match(meta.get(), delegate_ids, count)) {
    return fail(Error::InvalidProgram,
                "the uploaded program's delegates are not the request's delegates");
  }
  if (!plan_memory(meta.get())) {
    return fail(Error::MemoryAllocationFailed,
                "the method's planned memory does not fit the planned arena (planned_arena in "
                "HELLO)");
  }
  method_allocator.make(static_cast<uint32_t>(sizeof method_arena), method_arena);
  temp_allocator.make(static_cast<uint32_t>(sizeof temp_arena), temp_arena);
  memory_manager.make(method_allocator.object, planned.object, temp_allocator.object);
  Result<Method> method =
      program.object->load_method(kMethodName, memory_manager.object, nullptr, nullptr, map);
  memory.method_used = method_allocator.object->used_size();
  memory.temp_used = temp_allocator.object->used_size();
  if (!method.ok()) {
    return method.error();
  }
  runtime_method.make(std::move(method.get()));
  loaded_ = true;
  return Error::Ok;
}

Error DelegateMethod::execute() {
  if (!loaded_) {
    return Error::InvalidState;
  }
  Error error = runtime_method.object->execute();
  memory.temp_used = temp_allocator.object->used_size();
  return error;
}

void DelegateMethod::unload() {
  runtime_method.drop(); /* ~Method destroys its delegates */
  memory_manager.drop();
  planned.drop();
  temp_allocator.drop();
  method_allocator.drop();
  program.drop();
  loader.drop();
  loaded_ = false;
}

}  // namespace mcu
