// Interposes Program::load_method (every load path of the agent ends there) for an
// LD_PRELOAD shim: each call runs the shim's etb_on_load_method(method_name) first, then
// the real runtime's load_method (the next definition after the shim). Included by one
// source file of each shim (etb_race_shim.cpp, etb_dangling_shim.cpp), which defines
// etb_on_load_method.
#pragma once

#include <dlfcn.h>

#include <executorch/runtime/executor/program.h>

#include <cstdio>
#include <cstdlib>

void etb_on_load_method(const char* method_name);

namespace executorch::runtime {

Result<Method> Program::load_method(const char* method_name, MemoryManager* memory_manager, EventTracer* event_tracer,
                                    const NamedDataMap* named_data_map, const LoadBackendOptionsMap* backend_options,
                                    Span<const Kernel> kernels) const {
  using Real = Result<Method> (*)(const Program*, const char*, MemoryManager*, EventTracer*, const NamedDataMap*,
                                  const LoadBackendOptionsMap*, Span<const Kernel>);
  static const char* const mangled =
      "_ZNK10executorch7runtime7Program11load_methodEPKcPNS0_13MemoryManagerEPNS0_11EventTracerEPKNS0_"
      "12NamedDataMapEPKNS0_21LoadBackendOptionsMapENS0_4SpanIKNS0_6KernelEEE";
  static const Real real = [] {
    void* symbol = dlsym(RTLD_NEXT, mangled);
    if (symbol == nullptr) {
      std::fprintf(stderr, "shim: %s not found after the shim: %s\n", mangled, dlerror());
      std::abort();
    }
    return reinterpret_cast<Real>(symbol);
  }();
  etb_on_load_method(method_name);
  return real(this, method_name, memory_manager, event_tracer, named_data_map, backend_options, kernels);
}

}  // namespace executorch::runtime
