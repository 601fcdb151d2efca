// A deliberately wrong LD_PRELOAD shim: a read of freed memory that memcheck must report.
//
// It interposes Program::load_method (every load path of the agent ends there) and,
// before forwarding each call to the real runtime, copies the method's name into a heap
// block, frees the block and then reads its first byte: a dangling read, on every LOAD
// and only there. What the read returns depends on the allocator (the block's bytes may
// still hold the name, or the allocator's own bookkeeping), so without a memory checker
// nothing is seen; the shim only writes that byte to a volatile sink. tests/test_memcheck.py
// preloads it into the host agent under memcheck and checks that the tests that LOAD fail
// with memcheck's report (the read, where the block was freed) while the others pass.
#include <dlfcn.h>

#include <executorch/runtime/executor/program.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

volatile char last_seen = 0;

template <typename F>
F next_definition(const char* mangled) {
  void* symbol = dlsym(RTLD_NEXT, mangled);
  if (symbol == nullptr) {
    std::fprintf(stderr, "etb_dangling_shim: %s not found after the shim: %s\n", mangled, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(symbol);
}

__attribute__((noinline)) void read_after_free(const char* name) {
  size_t size = std::strlen(name) + 1;
  char* copy = static_cast<char*>(std::malloc(size));
  if (copy == nullptr) {
    return;
  }
  std::memcpy(copy, name, size);
  std::free(copy);
  last_seen = copy[0];  // the dangling read
}

}  // namespace

namespace executorch::runtime {

Result<Method> Program::load_method(const char* method_name, MemoryManager* memory_manager, EventTracer* event_tracer,
                                    const NamedDataMap* named_data_map, const LoadBackendOptionsMap* backend_options,
                                    Span<const Kernel> kernels) const {
  using Real = Result<Method> (*)(const Program*, const char*, MemoryManager*, EventTracer*, const NamedDataMap*,
                                  const LoadBackendOptionsMap*, Span<const Kernel>);
  static const Real real = next_definition<Real>(
      "_ZNK10executorch7runtime7Program11load_methodEPKcPNS0_13MemoryManagerEPNS0_11EventTracerEPKNS0_"
      "12NamedDataMapEPKNS0_21LoadBackendOptionsMapENS0_4SpanIKNS0_6KernelEEE");
  read_after_free(method_name);
  return real(this, method_name, memory_manager, event_tracer, named_data_map, backend_options, kernels);
}

}  // namespace executorch::runtime
