// SPDX-License-Identifier: BSD-3-Clause
/*
 * program_method.cpp - the models of a LOAD (mcu_method.h) over ExecuTorch's own
 * Program and Method, compiled from the source tree.
 *
 * A fresh load runs Program::load on a BufferDataLoader over the held program the
 * LOAD names (mcu_program.h); every load then checks that the method's delegate
 * table names the request's delegates in order (InvalidProgram otherwise, as the
 * hosted agents do), and calls Program::load_method(method, &memory_manager,
 * nullptr, nullptr, map): Method::init looks each delegate's backend up in the
 * runtime's registry and calls its init with map->get_options(id) as
 * runtime_specs. A method already loaded is not loaded again. Each method's
 * MemoryAllocator takes what the methods loaded before left of one static method
 * arena, its planned buffers likewise of the planned arena; a failed load gives
 * its part back. Program, Method and all allocators live in static storage:
 * nothing is allocated (et_pal_allocate answers nullptr).
 */
#include "mcu_method.h"

#include <string.h>
#include <new>
#include <utility>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include "mcu_program.h"

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

constexpr size_t kMaxPlannedBuffers = 4;
constexpr size_t kArenaAlignment = 16;

alignas(16) uint8_t method_arena[MCU_METHOD_ARENA_BYTES];
alignas(16) uint8_t planned_arena[MCU_PLANNED_ARENA_BYTES];
alignas(16) uint8_t temp_arena[MCU_TEMP_ARENA_BYTES];

/* Objects built at each load in static storage (no static constructors, no heap). */
template <typename T>
struct Slot {
  alignas(T) uint8_t bytes[sizeof(T)];
  T* object;

  template <typename... Args>
  T* make(Args&&... args) {
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

struct LoadedMethod {
  const char* name;                   /* the program's own string (MethodMeta::name) */
  size_t method_bytes, planned_bytes; /* what it took of the arenas */
  Slot<MemoryAllocator> allocator;
  Slot<HierarchicalAllocator> planned;
  Slot<MemoryManager> memory_manager;
  Slot<Method> method;

  void drop() {
    method.drop(); /* ~Method destroys its delegates */
    memory_manager.drop();
    planned.drop();
    allocator.drop();
    name = nullptr;
  }
};

struct Model {
  bool has_program;
  int slot; /* the program store's slot, pinned while the program is loaded */
  Slot<BufferDataLoader> loader;
  Slot<Program> program;
  LoadedMethod methods[MCU_METHODS_PER_MODEL];
  LoadedMethod* current; /* what EXECUTE runs */
};

Model models[MCU_MAX_MODELS];
/* Per model and method: the planned buffers (here, not in LoadedMethod, so that every static
   is constant-initialised: no static constructors). */
Span<uint8_t> planned_spans[MCU_MAX_MODELS][MCU_METHODS_PER_MODEL][kMaxPlannedBuffers];
Slot<MemoryAllocator> temp_allocator;
MethodMemory memory = {MCU_METHOD_ARENA_BYTES, 0, MCU_PLANNED_ARENA_BYTES, 0, MCU_TEMP_ARENA_BYTES, 0};
const char* failure;

Error fail(Error error, const char* why) {
  failure = why;
  return error;
}

size_t aligned(size_t n) { return (n + kArenaAlignment - 1u) & ~(kArenaAlignment - 1u); }

bool delegates_match(const MethodMeta& meta, const ModelLoad& load) {
  if (meta.num_backends() != load.delegate_count) {
    return false;
  }
  for (size_t i = 0; i < load.delegate_count; i++) {
    Result<const char*> name = meta.get_backend_name(i);
    if (!name.ok() || strcmp(name.get(), load.delegate_ids[i]) != 0) {
      return false;
    }
  }
  return true;
}

/* The method's memory-planned buffers, carved from what the planned arena has left. */
bool plan_memory(const MethodMeta& meta, LoadedMethod& loaded, Span<uint8_t>* spans) {
  size_t n = meta.num_memory_planned_buffers();
  size_t used = 0;
  size_t room = MCU_PLANNED_ARENA_BYTES - memory.planned_bytes;
  if (n > kMaxPlannedBuffers) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    Result<int64_t> size = meta.memory_planned_buffer_size(i);
    if (!size.ok() || size.get() < 0 || static_cast<uint64_t>(size.get()) > room - used) {
      return false;
    }
    spans[i] = Span<uint8_t>(&planned_arena[memory.planned_bytes + used], static_cast<size_t>(size.get()));
    used = aligned(used + static_cast<size_t>(size.get()));
    used = used < room ? used : room;
  }
  loaded.planned_bytes = used;
  loaded.planned.make(Span<Span<uint8_t>>(spans, n));
  return true;
}

void drop_program(Model& model) {
  for (LoadedMethod& loaded : model.methods) {
    loaded.drop();
  }
  model.current = nullptr;
  model.program.drop();
  model.loader.drop();
  if (model.has_program) {
    program_unpin(model.slot);
  }
  model.has_program = false;
}

Error open_program(Model& model, const ModelLoad& load) {
  int slot = program_find(load.program);
  if (slot < 0) {
    return fail(Error::AccessFailed, load.program.len == 0u
                                         ? "no program held: upload one with PROGRAM_DATA and PROGRAM_END (actions 9, "
                                           "10)"
                                         : "the program the LOAD names is not held on this board: upload it with "
                                           "PROGRAM_DATA and PROGRAM_END (actions 9, 10)");
  }
  model.loader.make(program_bytes(slot), program_size(slot));
  Result<Program> parsed = Program::load(model.loader.object, Program::Verification::InternalConsistency);
  if (!parsed.ok()) {
    model.loader.drop();
    return fail(parsed.error(), "Program::load refused the uploaded program");
  }
  model.program.make(std::move(parsed.get()));
  model.slot = slot;
  model.has_program = true;
  program_pin(slot);
  return Error::Ok;
}

LoadedMethod* find_method(Model& model, const char* name) {
  for (LoadedMethod& loaded : model.methods) {
    if (loaded.name != nullptr && strcmp(loaded.name, name) == 0) {
      return &loaded;
    }
  }
  return nullptr;
}

LoadedMethod* free_method(Model& model) {
  for (LoadedMethod& loaded : model.methods) {
    if (loaded.name == nullptr) {
      return &loaded;
    }
  }
  return nullptr;
}

}  // namespace

const MethodMemory& method_memory() { return memory; }

const char* model_failure() { return failure; }

Error model_load(const ModelLoad& load) {
  Model& model = models[load.model];
  failure = nullptr;
  if (!load.keep) {
    drop_program(model);
    Error opened = open_program(model, load);
    if (opened != Error::Ok) {
      return opened;
    }
  } else if (!model.has_program) {
    return fail(Error::InvalidState, "KEEP on path program needs a program loaded before on a program path");
  } else if (program_find(load.program) != model.slot) {
    return fail(Error::InvalidArgument, "KEEP names another program than the loaded one");
  }
  Result<MethodMeta> meta = model.program.object->method_meta(load.method);
  if (!meta.ok()) {
    return fail(meta.error(), "the program has no such method: Program::method_meta refused it");
  }
  if (!delegates_match(meta.get(), load)) {
    return fail(Error::InvalidProgram, "the program's delegates are not the request's delegates");
  }
  LoadedMethod* loaded = find_method(model, load.method);
  if (loaded != nullptr) {
    model.current = loaded; /* as Module::load_method does: not initialised again */
    return Error::Ok;
  }
  loaded = free_method(model);
  if (loaded == nullptr) {
    return fail(Error::MemoryAllocationFailed, "this firmware holds 2 methods per program (MCU_METHODS_PER_MODEL)");
  }
  Span<uint8_t>* spans = planned_spans[load.model][loaded - model.methods];
  if (!plan_memory(meta.get(), *loaded, spans)) {
    loaded->drop();
    return fail(Error::MemoryAllocationFailed,
                "the method's planned memory does not fit what the planned arena has left "
                "(arenas in HELLO)");
  }
  if (temp_allocator.object == nullptr) {
    temp_allocator.make(static_cast<uint32_t>(sizeof temp_arena), temp_arena);
  }
  loaded->allocator.make(static_cast<uint32_t>(MCU_METHOD_ARENA_BYTES - memory.method_used),
                         &method_arena[memory.method_used]);
  loaded->memory_manager.make(loaded->allocator.object, loaded->planned.object, temp_allocator.object);
  Result<Method> method =
      model.program.object->load_method(load.method, loaded->memory_manager.object, nullptr, nullptr, load.map);
  if (!method.ok()) {
    loaded->drop();
    return method.error();
  }
  loaded->method.make(std::move(method.get()));
  loaded->name = meta.get().name();
  loaded->method_bytes = aligned(loaded->allocator.object->used_size());
  memory.method_used += loaded->method_bytes;
  if (memory.method_used > MCU_METHOD_ARENA_BYTES) {
    memory.method_used = MCU_METHOD_ARENA_BYTES;
  }
  memory.planned_bytes += loaded->planned_bytes;
  model.current = loaded;
  return Error::Ok;
}

Error model_execute(size_t model) {
  LoadedMethod* loaded = models[model].current;
  if (loaded == nullptr) {
    return Error::InvalidState;
  }
  Error error = loaded->method.object->execute();
  size_t used = temp_allocator.object->used_size();
  memory.temp_used = used > memory.temp_used ? used : memory.temp_used;
  return error;
}

bool model_has_method(size_t model) { return models[model].current != nullptr; }

bool model_has_program(size_t model) { return models[model].has_program; }

const char* model_program(size_t model) { return models[model].has_program ? program_name(models[model].slot) : ""; }

void models_unload() {
  for (Model& model : models) {
    drop_program(model);
  }
  memory.method_used = 0;
  memory.planned_bytes = 0;
  memory.temp_used = 0;
}

}  // namespace mcu
