// A deliberately racy LD_PRELOAD shim: a data race a race detector must report.
//
// It interposes Program::load_method (every load path of the agent ends there)
// and, before forwarding each call to the real runtime, starts a thread that
// bumps a plain counter while the calling thread bumps it too, then joins it:
// two unsynchronised writes to one int, on every LOAD and only there.
// tests/test_race_detector.py preloads it into the host agent under each race
// detector (built with -fsanitize=thread for tsan, plainly for helgrind and
// drd) and checks that the tests that LOAD fail with the detector's report while
// the others pass, and that without the shim nothing is reported.
#include <dlfcn.h>

#include <executorch/runtime/executor/program.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

int loads_seen = 0;  // written by two threads at once: the race

template <typename F>
F next_definition(const char* mangled) {
  void* symbol = dlsym(RTLD_NEXT, mangled);
  if (symbol == nullptr) {
    std::fprintf(stderr, "etb_race_shim: %s not found after the shim: %s\n", mangled, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(symbol);
}

__attribute__((noinline)) void bump_loads_seen() { loads_seen = loads_seen + 1; }

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
  std::thread other(bump_loads_seen);
  bump_loads_seen();
  other.join();
  return real(this, method_name, memory_manager, event_tracer, named_data_map, backend_options, kernels);
}

}  // namespace executorch::runtime
